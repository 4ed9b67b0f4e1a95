"""The web chat in a real browser (the system's Chromium through Playwright) against
``clawd serve`` and the stand-in model: a reply streamed and rendered as Markdown, tool
calls collapsed, stop, history kept over a reload (and paged back), two tabs on one
session, /new and /compact, the context meter, a phone's screen. Screenshots are kept in
tests/artifacts/."""

from __future__ import annotations

import json
import re
import time

import pytest

from fakeserver import openai_error
from webchat import PHONE, idle, open_session, send, shot, texts

pytestmark = pytest.mark.slow  # a browser and a server process

MARKDOWN = ("## Plan\n\nFirst **the deploy**, then *the notes*:\n\n- check `config.yaml`\n"
            "- run the tests\n  - the slow ones too\n\n1. one\n2. two\n\n"
            "```sh\nclawd serve --port 8080\n```\n\n| step | who |\n|---|---|\n"
            "| build | CI |\n\nSee [the docs](https://example.com/docs) or "
            "<img src=x onerror=\"window.pwned=1\"> <script>window.pwned=2</script>.")

# The meter before a session's first model call: a share, from the fixed layers' estimate.
FIXED_SHARE = ("() => /^context \\d+%$/.test(document.getElementById('meter-text').textContent)"
               " && document.getElementById('meter').title.includes('no model call yet')")


def test_a_reply_streams_as_markdown_and_survives_a_reload(web, stand_in):
    stand_in.answer = lambda body, words: MARKDOWN
    stand_in.delay, stand_in.chunk = 0.03, 8
    page = web.page("stream")
    # before the first message the meter shows the fixed layers' share, as /status does
    page.wait_for_function(FIXED_SHARE)
    send(page, "what is the plan?")
    # while the reply streams: a growing bubble and the stop button
    page.wait_for_selector(".msg.assistant.streaming")
    assert page.is_visible("#stop") and not page.is_visible("#send")
    partial = page.text_content(".msg.assistant.streaming")
    idle(page)
    assert 0 < len(partial or "") < len(page.text_content(".msg.assistant"))
    shot(page, "desktop-reply")
    _check_rendered(page)
    assert texts(page, ".msg.user .bubble") == ["what is the plan?"]

    page.reload()
    idle(page)
    _check_rendered(page)
    assert texts(page, ".msg.user .bubble") == ["what is the plan?"]
    assert page.text_content("#meter-text").startswith("context ")
    assert page.text_content("#meter-text") != "context —"
    assert page.text_content("#model") == "local/qwen"
    assert "stream" in texts(page, ".session.active .session-meta")[0]



def test_a_reply_stopped_for_looping_says_so_after_a_reload_too(web, stand_in):
    stand_in.answer = lambda body, words: "Here is what to pack:\n" + "Sunglasses\n" * 80
    page = web.page("looping")
    send(page, "what should I pack?")
    idle(page)
    stopped = "the reply was stopped: the model kept repeating itself"
    assert texts(page, ".line.notice").count(stopped) == 1  # the history's, not twice
    page.reload()
    idle(page)
    assert texts(page, ".line.notice") == [stopped]
    assert texts(page, ".msg.assistant .bubble")[-1].strip().endswith("Sunglasses")
    shot(page, "desktop-looping-reloaded")


def _check_rendered(page) -> None:
    reply = ".msg.assistant .bubble"
    assert page.text_content(f"{reply} h2") == "Plan"
    assert page.text_content(f"{reply} strong") == "the deploy"
    assert texts(page, f"{reply} ul > li > code") == ["config.yaml"]
    assert texts(page, f"{reply} li li") == ["the slow ones too"]
    assert texts(page, f"{reply} ol > li") == ["one", "two"]
    assert page.text_content(f"{reply} pre code") == "clawd serve --port 8080"
    assert texts(page, f"{reply} td") == ["build", "CI"]
    link = page.query_selector(f"{reply} a")
    assert link.get_attribute("href") == "https://example.com/docs"
    assert link.get_attribute("rel") == "noopener noreferrer"
    # the model's markup is text, never elements
    assert page.query_selector_all(f"{reply} img, {reply} script") == []
    assert "<img src=x" in page.text_content(reply)
    assert page.evaluate("window.pwned") is None


def test_tool_calls_are_shown_collapsed(web, stand_in, web_served):
    web_served.storage().files.write("notes.md", "alpha beta\n")

    def answer(body, words):
        if body["messages"][-1]["role"] == "tool":
            return "The notes say **alpha beta**."
        return [{"id": "call_1", "name": "read", "arguments": {"path": "notes.md"}}]

    stand_in.answer = answer
    page = web.page("tools", color_scheme="dark")
    send(page, "what is in my notes?")
    idle(page)
    for _ in range(2):  # as streamed, then as the history shows it after a reload
        tool = page.query_selector("details.tool")
        assert tool.get_attribute("open") is None
        assert texts(page, "details.tool summary span") == ["read", "notes.md", "done"]
        assert not page.is_visible("details.tool pre.result")
        page.click("details.tool summary")
        assert "alpha beta" in page.text_content("details.tool pre.result")
        assert page.text_content(".msg.assistant strong") == "alpha beta"
        shot(page, "desktop-dark-tool-open")
        page.reload()
        idle(page)


def test_stop_keeps_the_partial_reply(web, stand_in, web_served):
    words = " ".join(f"word{n}" for n in range(80))
    stand_in.answer = lambda body, said: words
    stand_in.delay, stand_in.chunk = 0.05, 6
    page = web.page("stop")
    send(page, "say many words")
    page.wait_for_function("() => (document.querySelector('.msg.assistant.streaming')"
                           "?.textContent || '').length > 20")
    page.click("#stop")
    idle(page)
    kept = page.text_content(".msg.assistant .bubble")
    assert 20 < len(kept) < len(words) and words.startswith(kept)
    assert "stopped" in texts(page, ".msg.assistant .tag")
    assert any("interrupted" in line for line in texts(page, ".line.notice"))
    shot(page, "desktop-stopped")
    page.reload()
    idle(page)
    assert page.text_content(".msg.assistant .bubble") == kept
    assert "stopped" in texts(page, ".msg.assistant .tag")
    lines = web_served.transcript("agent:main:stop")
    assert [m["role"] for m in lines] == ["user", "assistant"]
    assert lines[1].get("aborted") is True


def test_a_reload_mid_reply_follows_the_turn(web, stand_in):
    words = " ".join(f"w{n}" for n in range(40))
    stand_in.answer = lambda body, said: words
    stand_in.delay, stand_in.chunk = 0.05, 6
    page = web.page("reload")
    send(page, "keep going")
    page.wait_for_selector(".msg.assistant.streaming")
    page.reload()
    # the turn went on at the gateway: the page picks it up and shows it to the end
    page.wait_for_selector("#stop:not([hidden])")
    idle(page)
    assert texts(page, ".msg.user .bubble") == ["keep going"]
    assert texts(page, ".msg.assistant .bubble") == [words]


def test_errors_and_notices_are_shown(web, stand_in, web_served):
    stand_in.answer = lambda body, words: openai_error(500, "the model server fell over")
    page = web.page("errors")
    send(page, "are you there?")
    idle(page)
    errors = texts(page, ".line.error")
    assert len(errors) == 1 and "fell over" in errors[0]
    assert texts(page, ".msg.user .bubble") == ["are you there?"]
    stand_in.answer = lambda body, words: ""  # a blank answer: asked again, then a notice
    send(page, "say nothing")
    idle(page)
    assert texts(page, ".line.notice"), "a blank answer is said in a notice"
    send(page, "/model nosuch/model")
    idle(page)
    assert len(texts(page, ".line.error")) == 2
    shot(page, "desktop-errors")


def test_agents_are_picked_and_each_keeps_its_sessions(web, stand_in, web_served):
    page = web.page("picked")
    assert page.is_visible("#agent")
    assert page.eval_on_selector_all("#agent option", "os => os.map(o => o.value)") == [
        "main", "work"]
    page.select_option("#agent", "work")
    page.wait_for_function("() => document.getElementById('title').textContent === 'main'")
    idle(page)
    send(page, "for the work agent")
    idle(page)
    assert [m["role"] for m in web_served.transcript("agent:work:main")] == ["user",
                                                                          "assistant"]
    page.reload()  # the agent and its session are remembered
    idle(page)
    assert page.input_value("#agent") == "work"
    assert texts(page, ".msg.user .bubble") == ["for the work agent"]
    page.select_option("#agent", "main")
    page.wait_for_function("() => document.getElementById('title').textContent === 'picked'")
    idle(page)
    assert texts(page, ".msg.user .bubble") == []


def test_history_pages_back(web, stand_in, web_served):
    for n in range(30):
        answer = web_served.api("POST", "/api/sessions/pages/messages",
                                json={"text": f"message {n}"},
                                headers={"Accept": "application/json"})
        assert answer.status_code == 200, answer.text
    page = web.page("pages")
    assert len(page.query_selector_all(".msg")) == 50
    assert page.is_visible("#older")
    assert texts(page, ".msg.user .bubble")[-1] == "message 29"
    page.eval_on_selector("#log", "log => { log.scrollTop = 0; }")  # scrolling up loads more
    page.wait_for_function("() => document.querySelectorAll('.msg').length === 60")
    assert page.is_hidden("#older")
    users = texts(page, ".msg.user .bubble")
    assert users == [f"message {n}" for n in range(30)]
    assert texts(page, ".msg.assistant .bubble")[0] == "echo: message 0"


def test_two_tabs_on_one_session_one_writer(web, stand_in, web_served):
    stand_in.answer = lambda body, said: f"reply to {said} " + "lorem ipsum " * 6
    stand_in.delay, stand_in.chunk = 0.03, 8
    context = web.context()
    first = web.page("shared", context=context)
    second = web.page("shared", context=context)
    send(first, "from the first tab")
    first.wait_for_selector(".msg.assistant.streaming")
    send(second, "from the second tab")  # the session is busy: this one waits its turn
    idle(first)
    idle(second)
    lines = web_served.transcript("agent:main:shared")
    said = [(m["role"], m["content"][0]["text"]) for m in lines]
    assert [role for role, _ in said] == ["user", "assistant"] * 2
    assert [text for role, text in said if role == "user"] == ["from the first tab",
                                                               "from the second tab"]
    assert said[1][1].startswith("reply to from the first tab")
    assert said[3][1].startswith("reply to from the second tab")
    for page in (first, second):
        page.reload()
        idle(page)
        assert texts(page, ".msg.user .bubble") == ["from the first tab", "from the second tab"]
        assert [t.split(" lorem")[0] for t in texts(page, ".msg.assistant .bubble")] == [
            "reply to from the first tab", "reply to from the second tab"]
    shot(second, "desktop-two-tabs")


def test_new_compact_and_typed_commands(web, stand_in, web_served):
    stand_in.answer = lambda body, words: "Understood; " + "a reply of some length " * 8
    page = web.page("commands")
    for n in range(3):
        send(page, f"point {n}: " + "a fairly long line of words to summarise " * 8)
        idle(page)
    first_id = web_served.api("GET", "/api/sessions/commands/context").json()["sessionId"]
    page.click("#cmd-compact")
    idle(page)
    assert page.query_selector("details.compaction") or texts(page, ".line.notice")
    send(page, "/status")
    idle(page)
    status = texts(page, ".line.command pre")
    assert status and "Model:" in status[-1] and "local/qwen" in status[-1]
    assert "› /status" in texts(page, ".line.typed")
    assert texts(page, ".line.error") == []
    shot(page, "desktop-commands")
    page.click("#cmd-new")
    idle(page)
    assert texts(page, ".msg.user .bubble") == []
    assert texts(page, ".line.typed") == ["› /new"]  # the new session's log starts there
    after = web_served.api("GET", "/api/sessions/commands/context").json()
    assert after["sessionId"] != first_id
    page.wait_for_function(FIXED_SHARE)  # the new session's meter: no model call yet


def test_a_phone_sized_screen(web, stand_in):
    stand_in.answer = lambda body, words: (
        "A long line: `" + "x" * 120 + "`\n\n```\n" + "y" * 200 + "\n```\n\n"
        "| a | b | c | d |\n|---|---|---|---|\n| " + " | ".join(["wide cell text"] * 4) + " |")
    page = web.page("phone", viewport=PHONE, is_mobile=True, has_touch=True,
                    device_scale_factor=2)
    send(page, "show me something wide")
    idle(page)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    assert page.evaluate("document.querySelector('.log').scrollWidth") <= PHONE["width"]
    box = page.query_selector("#sidebar").bounding_box()
    assert box["x"] + box["width"] <= 0  # off screen until the menu opens it
    for selector in ("#input", "#send", "#cmd-new", "#cmd-compact", "#meter"):
        found = page.query_selector(selector).bounding_box()
        assert found and found["x"] >= 0 and found["x"] + found["width"] <= PHONE["width"], \
            selector
        assert found["y"] + found["height"] <= PHONE["height"], selector
    shot(page, "phone-chat")
    page.click("#menu")
    page.wait_for_function("() => document.querySelector('#sidebar')"
                           ".getBoundingClientRect().x >= 0")
    assert page.is_visible(".session.active")
    shot(page, "phone-sessions")
    page.click("#backdrop", position={"x": 370, "y": 400})
    page.wait_for_function("() => document.querySelector('#sidebar')"
                           ".getBoundingClientRect().right <= 0")


def test_a_session_named_in_any_script_works_end_to_end(web, stand_in, web_served):
    page = web.page("unicode")
    name = "日本の旅 ☃"
    open_session(page, name)
    send(page, "konnichiwa")
    idle(page)
    assert texts(page, ".msg.user .bubble") == ["konnichiwa"]
    page.reload()
    idle(page)
    assert page.text_content("#title") == name
    assert texts(page, ".msg.user .bubble") == ["konnichiwa"]
    assert [m["role"] for m in web_served.transcript(f"agent:main:{name}")] == ["user",
                                                                               "assistant"]
    shot(page, "unicode-session")


def test_the_page_says_what_it_waits_on_until_the_first_words(web, stand_in):
    """The "…" bubble went at the first event (recall comes first), and a slow model's
    20 s to minutes before the first token showed nothing."""
    def slow(body, words):
        time.sleep(2.5)
        return "at last"

    stand_in.answer = slow
    page = web.page("waiting")
    send(page, "take your time")
    page.wait_for_function("() => /waiting for the model… [12] s/.test("
                           "document.querySelector('.msg.waiting')?.textContent || '')")
    shot(page, "desktop-waiting")
    idle(page)
    assert page.query_selector(".msg.waiting") is None
    assert texts(page, ".msg.assistant .bubble") == ["at last"]


def test_each_message_has_its_time_and_copy_and_the_last_reply_a_retry(web, stand_in,
                                                                       web_served):
    code = "def greet(name):\n    return 'hi ' + name  # 2 words"
    answers = iter([f"First answer.\n\n```python\n{code}\n```", "Second answer.",
                    "Second answer, again."])
    stand_in.answer = lambda body, words: next(answers)
    page = web.page("actions")
    for text in ("one", "two"):
        send(page, text)
        idle(page)
    stamps = texts(page, ".msg .acts time")
    assert len(stamps) == 4 and all(re.fullmatch(r"\d\d:\d\d", s) for s in stamps)
    assert len(page.query_selector_all(".msg.assistant .acts .act")) >= 2  # copy on each
    assert page.query_selector_all(".code > .act") and \
        page.text_content(".code > .act") == "copy code"
    # highlighted, and the code itself unchanged
    assert page.text_content(".msg.assistant pre code") == code
    assert texts(page, "pre .tok-kw") == ["def", "return"]
    assert texts(page, "pre .tok-str") == ["'hi '"]
    assert texts(page, "pre .tok-com") == ["# 2 words"]
    retries = page.query_selector_all(".act.retry")
    assert len(retries) == 1  # the last reply only
    shot(page, "desktop-actions")
    retries[0].click()
    page.wait_for_function("() => [...document.querySelectorAll('.msg.assistant .bubble')]"
                           ".some(b => b.textContent === 'Second answer, again.')")
    idle(page)
    assert texts(page, ".msg.assistant .bubble")[-1] == "Second answer, again."
    # "edit" on the last message takes it back and puts its words in the box
    edits = page.query_selector_all(".act.edit")
    assert len(edits) == 1
    edits[0].click()
    page.wait_for_function("() => document.getElementById('input').value === 'two'")
    idle(page)
    assert texts(page, ".msg.user:not(.undone) .bubble") == ["one"]  # the rest taken back
    assert [b.get_attribute("class") for b in page.query_selector_all(".act.edit")] == [
        "act edit"]  # now on "one"


def test_ended_sessions_are_listed_read_only_and_can_be_deleted(web, stand_in, web_served):
    page = web.page("history-of")
    send(page, "the first session")
    idle(page)
    page.click("#cmd-new")
    idle(page)
    send(page, "the second session")
    idle(page)
    assert page.query_selector(".session.ended") is None  # current sessions only
    page.check("#show-ended")
    page.wait_for_selector(".session.ended")
    ended = page.query_selector(".session.ended:has-text('the first session')")
    assert "ended" in ended.text_content()
    mine = f".session[data-session-id='{ended.get_attribute('data-session-id')}']"
    ended.click()
    idle(page)
    assert texts(page, ".msg.user .bubble") == ["the first session"]
    assert page.is_disabled("#input") and page.is_visible("#ended-note")
    assert page.query_selector(".act.retry") is None
    shot(page, "desktop-ended-session")
    page.on("dialog", lambda dialog: dialog.accept())
    page.hover(f".session-row:has({mine})")  # its buttons show on hover
    page.click(f".session-row:has({mine}) .session-delete")
    page.wait_for_function(f"() => !document.querySelector({json.dumps(mine)})")
    idle(page)
    assert not page.is_disabled("#input")  # back on a current session
    listed = web_served.api("GET", "/api/sessions?all=true").json()["sessions"]
    assert not [s for s in listed if not s["current"] and "history-of" in s["key"]]


def test_the_model_s_name_shows_on_a_phone(web, stand_in):
    page = web.page("phone-model", viewport=PHONE, is_mobile=True, has_touch=True)
    send(page, "hello")
    idle(page)
    box = page.query_selector("#model").bounding_box()
    assert page.is_visible("#model") and page.text_content("#model") == "local/qwen"
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    shot(page, "phone-model")


def test_a_session_is_renamed_from_the_list(web, stand_in):
    page = web.page("to-rename")
    send(page, "some first words")
    idle(page)
    page.on("dialog", lambda dialog: dialog.accept("Holiday plans"))
    page.hover(".session-row:has(.session.active)")  # its buttons show on hover
    page.click(".session-row:has(.session.active) .session-rename")
    page.wait_for_function("() => document.querySelector('.session.active .session-title')"
                           "?.textContent === 'Holiday plans'")
    page.reload()
    idle(page)
    assert page.text_content(".session.active .session-title") == "Holiday plans"


def test_a_person_signs_in_and_sees_their_own_agent_only(web, stand_in, web_served):
    import subprocess
    import sys

    added = subprocess.run([sys.executable, "-m", "clawd", "users", "add", "alice"],
                           env=web_served.env,
                           capture_output=True, text=True, timeout=60, check=True)
    token = added.stdout.strip().splitlines()[-1]
    time.sleep(2.5)  # the server looks its people up again every 2 s
    page = web.context().new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{web_served.url}/#token={token}")
    page.wait_for_selector("#app:not([hidden])")
    idle(page)
    assert page.eval_on_selector_all("#agent option", "os => os.map(o => o.value)") == [
        "alice"]
    assert not page.is_visible("#agent")  # one agent: nothing to pick
    send(page, "hello from alice")
    idle(page)
    shot(page, "person-signed-in")
    assert [m["role"] for m in web_served.transcript("agent:alice:main")] == ["user",
                                                                           "assistant"]
    assert "hello from alice" in web_served.said("alice")
    assert not [agent for agent in ("main", "work") if "hello from alice" in
                web_served.said(agent)]
    denied = web_served.api("GET", "/api/sessions?agent=main",
                            headers={"Authorization": f"Bearer {token}"})
    assert denied.status_code == 403
