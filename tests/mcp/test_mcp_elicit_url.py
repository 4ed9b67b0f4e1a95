"""A server's question in URL mode (MCP elicitation, a web page for the person to open): the
link as it may be shown (http(s) only, its host set apart), put to the person in the REPL
(``TerminalQuestions.link``) and on the web page (a ``question`` line with its ``url``),
declined where nobody can answer; and a call refused until the person has been to a page
(-32042). A real SDK server (``tests/mcp_links.py``) gets the answers and checks the client
declares both modes."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from clawd.config.mcp import McpServer
from clawd.frontends.questions import TerminalQuestions, can_open
from clawd.mcp.client import McpClients
from clawd.mcp.elicit import link, required_links, required_note

LINKS = str(Path(__file__).parents[1] / "mcp_links.py")
PAGE = "https://auth.example.com/start?state=1"


def test_only_a_web_address_is_shown_and_its_host_set_apart():
    shown = link("notes", "Sign in\x1b[2J\nplease", PAGE)
    assert (shown.url, shown.host, shown.refused) == (PAGE, "auth.example.com", "")
    assert shown.lines() == ["notes asks you to open a web page: Sign in[2J please",
                             f"  {PAGE}", "  host: auth.example.com"]
    tricky = link("notes", "", "https://bank.example.com@evil.example/login")
    assert tricky.host == "evil.example"  # the host is the one the browser goes to
    idn = link("notes", "", "https://exаmple.com/")  # a Cyrillic "а"
    assert idn.host.startswith("xn--") and "check it" in idn.lines()[2]
    for url, why in [("javascript:alert(1)", "javascript: is not http(s)"),
                     ("file:///etc/passwd", "file: is not http(s)"),
                     ("data:text/html,<b>hi</b>", "data: is not http(s)"),
                     ("example.com/x", "it is not an http(s) address"),
                     ("https:///path", "it names no host"),
                     ("https://example.com/a b", "it has spaces or control characters"),
                     ("https://example.com/\u202egnp.exe", "it has spaces or control characters"),
                     ("https://example.com/" + "a" * 5000, "it is over 4096 characters")]:
        refused = link("notes", "hi", url)
        assert refused.url == "" and refused.refused == (
            f"notes sent a link clawd does not show ({why}); declined"), url


def test_a_call_that_needs_a_page_first_says_so_in_one_line():
    data = {"elicitations": [{"mode": "url", "message": "Pay", "url": PAGE,
                              "elicitationId": "p"}, {"url": "file:///x"}, "junk"]}
    links = required_links("shop", data)
    assert [lk.host for lk in links] == ["auth.example.com", ""]
    agreed = required_note("shop", "pay", links[:1], ["accept"])
    assert agreed == ("shop: pay needs the person to finish something on a web page first "
                      "(auth.example.com); the person was asked to open it, and they agreed: "
                      "the call may be retried once they have finished there")
    assert required_note("shop", "pay", links, ["decline", "decline"]).endswith(
        "they did not (decline): the call is refused until they do")
    assert required_links("shop", None) == [] and "named no page" in required_note(
        "shop", "pay", [], [])


def test_a_browser_is_opened_only_on_a_desktop():
    assert can_open({}, "darwin") and can_open({"DISPLAY": ":0"}, "linux")
    assert not can_open({}, "linux")  # webbrowser would start a text browser here
    assert not can_open({"DISPLAY": ":0", "SSH_CONNECTION": "1 2 3 4"}, "linux")


def _clients(tmp_path: Path) -> McpClients:
    clients = McpClients({"links": McpServer(command=sys.executable, args=[LINKS],
                                             connection_timeout_ms=60_000)},
                         logs=tmp_path / "logs")
    clients.start()
    return clients


def _terminal(answers: list, said: list[str], opened: list[str]) -> TerminalQuestions:
    replies = iter(answers)

    def ask(prompt: str) -> str:
        said.append(prompt)
        reply = next(replies)
        if isinstance(reply, BaseException):
            raise reply
        return reply
    return TerminalQuestions(ask=ask, say=said.append,
                             open_url=lambda url: opened.append(url) or True)


@pytest.mark.slow
def test_the_repl_asks_before_a_page_is_opened(tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="clawd.mcp")
    said: list[str] = []
    opened: list[str] = []
    clients = _clients(tmp_path)

    def sign_in(url: str = PAGE) -> str:
        return clients.call("links", "sign_in", {"url": url}).text.splitlines()[-1]
    try:
        nobody = sign_in()
        questions = _terminal(["y", "n", KeyboardInterrupt(), EOFError()], said, opened)
        clients.elicit, clients.elicit_url = questions, questions.link
        results = [sign_in() for _ in range(4)]
        said.append("--")
        refused = sign_in("javascript:alert(1)")
        paid = clients.call("links", "pay", {})
    finally:
        clients.close()
    assert nobody == "sign-in: decline"
    # the server saw both modes declared, and each answer
    assert results == ["sign-in: accept", "sign-in: decline", "sign-in: cancel",
                       "sign-in: decline"]
    assert said[:6] == ["links asks you to open a web page: Sign in to Example[2J to go on.",
                        f"  {PAGE}", "  host: auth.example.com", "open it? [y/N]: ",
                        "opened in your browser: auth.example.com", said[5]]
    assert said.count("declined") == 2 and "cancelled" in said
    assert opened == [PAGE]  # only the page said yes to
    assert said[said.index("--") + 1:said.index("--") + 3] == [
        "links sent a link clawd does not show (javascript: is not http(s)); declined",
        "links asks you to open a web page: Confirm the payment."]
    assert refused == "sign-in: decline"
    # a call refused until the person has been to a page: asked, and the model told so
    assert paid.is_error and "\n" not in paid.text and paid.text.startswith(
        "links: pay needs the person to finish something on a web page first "
        "(pay.example.com)") and "they did not (decline)" in paid.text
    assert any("elicitation sign-1 complete" in r.getMessage() for r in caplog.records)


@pytest.mark.slow
def test_a_call_refused_until_a_page_is_seen_asks_and_may_be_retried(tmp_path):
    said: list[str] = []
    opened: list[str] = []
    clients = _clients(tmp_path)
    try:
        nobody = clients.call("links", "pay", {})
        questions = _terminal(["yes"], said, opened)
        clients.elicit, clients.elicit_url = questions, questions.link
        paid = clients.call("links", "pay", {})
    finally:
        clients.close()
    assert nobody.is_error and "they did not (decline)" in nobody.text
    assert paid.is_error and paid.text.endswith(
        "they agreed: the call may be retried once they have finished there")
    assert opened == ["https://pay.example.com/confirm?id=7"]
    assert "  host: pay.example.com" in said


@pytest.mark.slow
@pytest.mark.parametrize("approve", [True, False])
def test_the_web_page_shows_the_link_and_the_answer_decides(tmp_path, approve):
    from clawd.providers.scripted import Reply, ScriptedProvider, tool
    from clawd.tools.files import file_tools

    from conftest import make_runtime
    from gateway_client import gateway, page_turn, send

    clients = _clients(tmp_path)
    provider = ScriptedProvider([
        Reply("", [tool("links__sign_in", url=PAGE)]),
        Reply("", [tool("links__sign_in", url="javascript:alert(1)")]), "Done.",
        Reply("", [tool("links__sign_in", url=PAGE)]), "No answer."])
    rt = make_runtime(tmp_path, provider, tools=file_tools() + clients.tools())
    rt.mcp = clients
    try:
        with gateway(tmp_path, provider, runtimes=[rt]) as client:
            _, lines, said = page_turn(client, "sign me in",
                                       lambda line: [{"approve": approve}])
            assert [r.status_code for r in said] == [200], [r.text for r in said]
            scripted = send(client, "again")  # sent without approvals: nobody to ask
    finally:
        clients.close()
    asked = [line for line in lines if line["type"] == "question"]
    assert len(asked) == 1  # the javascript: link is never put to the page
    assert asked[0]["text"] == ("links asks you to open a web page: Sign in to Example[2J "
                                "to go on.")
    assert (asked[0]["url"], asked[0]["host"]) == (PAGE, "auth.example.com")
    assert any(line["type"] == "approvalAnswered" and line["approved"] is approve
               for line in lines)
    results = [line["text"].splitlines()[-1] for line in lines
               if line["type"] == "toolResult"]
    assert results == [f"sign-in: {'accept' if approve else 'decline'}", "sign-in: decline"]
    assert {"type": "notice", "text": "links sent a link clawd does not show (javascript: "
            "is not http(s)); declined"} in [
        {k: line.get(k) for k in ("type", "text")} for line in lines]
    declined = next(line for line in scripted if line["type"] == "toolResult")
    assert declined["text"].endswith("sign-in: decline")
    assert not any(line["type"] == "question" for line in scripted)


@pytest.mark.slow
def test_the_time_a_person_takes_to_answer_is_not_the_calls(tmp_path):
    """A call is bounded by ``requestTimeoutMs``, but not while the person is being asked:
    an answer slower than the time-out still reaches the server."""
    import time

    clients = McpClients({"links": McpServer(command=sys.executable, args=[LINKS],
                                             connection_timeout_ms=60_000,
                                             request_timeout_ms=1_000)},
                         logs=tmp_path / "logs")
    clients.start()
    said: list[str] = []
    try:
        slow = TerminalQuestions(ask=lambda prompt: time.sleep(2.5) or "y", say=said.append,
                                 open_url=lambda url: True)
        clients.elicit_url = slow.link
        result = clients.call("links", "sign_in", {"url": PAGE})
    finally:
        clients.close()
    assert result.text.splitlines()[-1] == "sign-in: accept"


def test_a_question_given_up_meanwhile_is_not_asked():
    """The call that asked timed out or was cancelled before the person's thread came to
    the question: it is dropped, and nothing fails on that thread."""
    import asyncio

    from clawd.mcp.asking import Asking

    asking, asked = Asking(), []
    asking.link = lambda found: asked.append(found) or "accept"

    async def given_up() -> None:
        task = asyncio.ensure_future(asking.opened(link("links", "hi", PAGE)))
        await asyncio.sleep(0)
        assert asking.open == 1
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert asking.open == 0
    asyncio.run(given_up())
    asking.answer()
    assert asked == []
