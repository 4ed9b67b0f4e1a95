"""The REPL in a real pseudo-terminal against the local stand-in server: what it draws while
a turn waits, and keys that arrive in one burst."""

from __future__ import annotations

import time

import pytest
from terminal import Terminal, plain

from conftest import write_local_config
from fakeserver import FakeServer, Response, openai_chunks

pytestmark = pytest.mark.slow
CHAT = "/v1/chat/completions"


@pytest.fixture
def server(isolated_home):
    with FakeServer() as s:
        write_local_config(isolated_home, s.url)
        yield s


@pytest.fixture
def terminal(server):
    made: list[Terminal] = []

    def start(*args: str, **kw) -> Terminal:
        made.append(Terminal("chat", *args, **kw))
        return made[-1]

    yield start
    for term in made:
        term.close()


def slow_first_token(text: str, seconds: float):
    """A streamed reply whose first chunk comes after ``seconds`` (a model reading)."""
    def handler(request) -> Response:
        def body():
            time.sleep(seconds)
            yield from openai_chunks(text)
        return Response(200, body(), {"content-type": "text/event-stream"})
    return handler


def test_a_slow_first_token_shows_what_clawd_waits_for_and_for_how_long(server, terminal):
    server.queue("POST", CHAT, slow_first_token("The answer is here.", 2.6))
    term = terminal()
    term.expect("›")
    term.send("hello there\r")
    term.expect(r"waiting for the model… 2 s · local/qwen")
    term.expect("The answer is here.")
    replied = term.output.find(b"The answer is here.")
    shown = plain(term.output)
    assert "waiting for the model… 0 s" in shown and "waiting for the model… 1 s" in shown
    # the line is erased before the reply: the reply starts on a clean line
    assert "\x1b[2K" in term.output.decode()
    term.expect("›", timeout=5, since=replied)  # the prompt is back
    term.expect("Esc\\+Enter", timeout=5, since=replied)  # and so is its status line


def test_a_fast_reply_draws_no_waiting_line(server, terminal):
    server.queue("POST", CHAT, slow_first_token("Quick.", 0.0))
    term = terminal()
    term.expect("›")
    term.send("hi\r")
    term.expect("Quick.")
    assert "waiting for" not in plain(term.output)


@pytest.mark.parametrize("columns", [80, 120])
def test_help_fits_the_terminal_and_breaks_no_word(server, terminal, columns):
    term = terminal(columns=columns)
    term.expect("›")
    start = len(term.output)
    term.send("/help\r")
    term.expect("Ctrl-L", since=start)
    lines = plain(term.output[start:]).splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("/help "))
    last = next(i for i, line in enumerate(lines) if line.startswith("Ctrl-L"))
    shown = lines[first:last + 1]  # the help itself, not the prompt's redraws around it
    assert all(len(line) <= columns for line in shown), shown
    text = " ".join(" ".join(shown).split())
    for phrase in ("show the model and where it comes from, pin one to this session, or "
                   "follow the config again", "search memory, show MEMORY.md and the memory "
                   "files, add a note to today's log, forget a fact (TEXT or PATH#Lx-Ly: "
                   "lists the lines; --yes removes them), or show the state of the memory "
                   "index"):
        assert phrase in text


@pytest.mark.parametrize("keys", [
    "/mem\t status\r",          # the text and Tab in one burst
    "/mem\t\t status\r",        # a second Tab keeps the one match
    "/memory st\t\r",           # a subcommand, the same way
])
def test_tab_in_the_same_burst_as_the_text_completes(server, terminal, keys):
    term = terminal()
    term.expect("›")
    start = len(term.output)
    term.send(keys)
    # /memory ran (memory search is off in this config); /mem would be an unknown command
    term.expect("memory search is off", since=start)
    assert "unknown command" not in plain(term.output[start:])
