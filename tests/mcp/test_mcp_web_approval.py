"""The web page's approve/deny in a real browser (the system's Chromium through Playwright)
against ``clawd serve`` with an MCP server whose tool changes things (``tests/mcp_notes.py``):
the call is shown with Approve and Deny, and the click decides whether it runs; a server
that sends the person to a web page (``tests/mcp_links.py``) is a link with Open and
Decline."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from conftest import write_local_config
from gateway_client import free_port, start_serve
from webchat import TOKEN, Served, WebChat, idle, send, shot, texts

pytestmark = pytest.mark.slow  # a browser and a server process
NOTES = str(Path(__file__).parents[1] / "mcp_notes.py")
LINKS = str(Path(__file__).parents[1] / "mcp_links.py")


@pytest.fixture(scope="module")
def served(web_model, tmp_path_factory):
    home = tmp_path_factory.mktemp("web-mcp") / "home"
    home.mkdir()
    write_local_config(home, web_model[1])
    path = home / ".clawd" / "clawd.json"
    config = json.loads(path.read_text())
    port = free_port()
    config["gateway"] = {"port": port, "shutdownGraceSeconds": 1}
    config["mcp"] = {"servers": {"notes": {"command": sys.executable,
                                           "args": [NOTES, str(home / "notes.txt")],
                                           "connectionTimeoutMs": 60_000},
                                 "links": {"command": sys.executable, "args": [LINKS],
                                           "connectionTimeoutMs": 60_000}}}
    path.write_text(json.dumps(config))
    env = {**os.environ, "HOME": str(home), "CLAWD_HOME": str(home / ".clawd"),
           "CLAWD_GATEWAY_TOKEN": TOKEN}
    env.pop("CLAWD_CONFIG", None)
    child, url = start_serve(env, port)
    served = Served(url, home, child, env)
    yield served
    assert "Traceback" not in served.stop()


def _calls_then_answers(body, words):
    if any(m.get("role") == "tool" for m in body.get("messages", [])):
        return "Done."
    return [{"id": "call_1", "name": "notes__add_note", "arguments": {"text": words}}]


@pytest.mark.parametrize("click, approved", [("approve", True), ("deny", False)])
def test_the_page_asks_before_an_mcp_tool_acts(chromium, served, stand_in, click, approved):
    stand_in.answer = _calls_then_answers
    chat = WebChat(chromium, served)
    try:
        page = chat.page(f"notes-{click}")
        send(page, f"remember {click}")
        page.wait_for_selector(".approval button.approve")
        assert 'notes__add_note {"text": "remember ' in page.text_content(".approval pre")
        shot(page, f"mcp-approval-{click}")
        page.click(f".approval button.{click}")
        idle(page)
        assert texts(page, ".approval .approval-buttons") == [
            "approved" if approved else "declined"]
        notes = served.home / "notes.txt"
        written = notes.read_text() if notes.exists() else ""
        assert (f"remember {click}" in written) is approved
    finally:
        assert chat.close() == []


def test_the_page_lists_the_servers_and_switches_one_off_for_the_session(
        chromium, served, stand_in):
    offered: list[list[str]] = []
    stand_in.answer = lambda body, words: offered.append(
        [t["function"]["name"] for t in body.get("tools", [])]) or f"echo: {words}"
    chat = WebChat(chromium, served)
    try:
        page = chat.page("services")
        page.wait_for_selector("#mcp:not([hidden]) .mcp-server")
        assert texts(page, ".mcp-name") == ["notes", "links"]
        page.click(".mcp-server summary .mcp-name")  # unfolds the tools
        assert "notes__add_note" in texts(page, ".mcp-tools code")
        page.uncheck(".mcp-server input[type=checkbox]")
        page.wait_for_selector(".mcp-server.off")
        idle(page)
        assert "are no more offered in this session" in page.text_content("#items")
        shot(page, "mcp-services-off")
        send(page, "hello")
        idle(page)
        page.check(".mcp-server input[type=checkbox]")
        page.wait_for_function(  # the first server (notes) is on again
            "() => !document.querySelector('.mcp-server').classList.contains('off')")
        idle(page)
    finally:
        assert chat.close() == []
    assert offered and "read" in offered[-1]
    assert not any(name.startswith("notes__") for name in offered[-1])


def test_a_servers_question_is_a_form_on_the_page(chromium, served, stand_in):
    def introduce(body, words):
        if any(m.get("role") == "tool" for m in body.get("messages", [])):
            return "Nice to meet you."
        return [{"id": "call_q", "name": "notes__introduce", "arguments": {}}]

    stand_in.answer = introduce
    chat = WebChat(chromium, served)
    try:
        page = chat.page("question")
        send(page, "who am I?")
        page.wait_for_selector(".question input[name=name]")
        assert "Who are you?" in page.text_content(".question .approval-text")
        page.fill(".question input[name=name]", "Ada")
        page.fill(".question input[name=age]", "36")
        page.select_option(".question select[name=tea]", "y")
        shot(page, "mcp-question")
        page.click(".question button.approve")
        idle(page)
        assert "hello Ada, 36, likes tea: True" in page.text_content("#items")
    finally:
        assert chat.close() == []


@pytest.mark.parametrize("click", ["approve", "deny"])
def test_a_servers_link_is_shown_with_open_and_decline(chromium, served, stand_in, click):
    target = f"{served.url}/?from=sign-in"  # a page that loads here: the gateway's own

    def sign_in(body, words):
        if any(m.get("role") == "tool" for m in body.get("messages", [])):
            return "Done."
        return [{"id": "call_s", "name": "links__sign_in", "arguments": {"url": target}}]

    stand_in.answer = sign_in
    chat = WebChat(chromium, served)
    try:
        page = chat.page(f"link-{click}")
        send(page, "sign me in")
        page.wait_for_selector(".question a.question-link")
        assert page.get_attribute(".question a.question-link", "href") == target
        assert page.get_attribute(".question a.question-link", "rel") == "noopener noreferrer"
        assert page.text_content(".question-host") == "host: 127.0.0.1"
        shot(page, f"mcp-link-{click}")
        if click == "approve":
            with page.context.expect_page() as opened:
                page.click(".question button.approve")
            assert opened.value.url.startswith(target)
        else:
            page.click(".question button.deny")
        idle(page)
        assert texts(page, ".question .approval-buttons") == [
            "approved" if click == "approve" else "declined"]
        said = "sign-in: accept" if click == "approve" else "sign-in: decline"
        assert said in page.text_content("#items")
    finally:
        assert chat.close() == []
