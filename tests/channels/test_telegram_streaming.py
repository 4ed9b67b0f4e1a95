"""A reply streamed into the chat: while the model writes, one message shows the text so
far, edited at most every ``EDIT_SECONDS`` and never with a tag cut open, a 429 keeping
previews away for its ``retry_after``; the final text replaces it. A quick reply is one
message, never edited. Against the Bot API stand-in (which refuses HTML whose tags do not
nest) through the real client library."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_telegram_service import served

from clawd.channels import replies, split
from clawd.core.messages import Message, ModelResponse, TextDelta, Usage

from telegram_standin import BotApi, html_problem

REPLY = ("Here is **the plan**, step by step, with _care_:\n\n"
         "```python\nprint('<b>not a tag</b>')\n```\n\n"
         "1. Read the [docs](https://example.com/a?b=1&c=2).\n"
         "2. Then `run it` & see ~~nothing~~ break.\n\n"
         "> A quote to end with, **bold** inside.")


@given(st.integers(min_value=0, max_value=len(REPLY)))
def test_a_preview_of_any_prefix_is_html_telegram_takes(cut):
    shown = replies.preview(REPLY[:cut])
    if REPLY[:cut].strip():
        assert shown.endswith(replies.UNFINISHED) and html_problem(shown) is None
    else:
        assert shown == ""


def test_a_long_preview_is_its_first_part_within_the_limit():
    long = "\n\n".join(f"Paragraph {n}: " + "words and **more words** " * 20
                       for n in range(20))
    shown = replies.preview(long)
    assert len(shown) <= split.TELEGRAM_LIMIT and html_problem(shown) is None
    assert shown.startswith("Paragraph 0") and "Paragraph 19" not in shown


class Streaming:
    """A model that writes ``REPLY`` in pieces of 6 characters, one every ``delay`` s."""

    name, model = "streaming", "streaming"

    def __init__(self, delay: float):
        self.delay = delay

    def stream(self, request):
        for i in range(0, len(REPLY), 6):
            time.sleep(self.delay)
            yield TextDelta(REPLY[i:i + 6])
        yield ModelResponse(Message.assistant(REPLY, usage=Usage(100, 5),
                                              stop_reason="stop"))


@pytest.mark.slow
def test_a_slow_reply_streams_into_one_message_then_the_final_text_replaces_it(
        tmp_path, monkeypatch):
    monkeypatch.setattr(replies, "EDIT_SECONDS", 0.3)
    model = Streaming(0.05)  # about 3 s of writing
    with BotApi() as api, served(tmp_path, api, {"dmPolicy": "open"}, provider=model) as _:
        api.throttle("editMessageText", 1)  # the first preview's edit: a 429
        started = time.monotonic()
        api.dm("plan it")
        final = split.parts(REPLY)[0]
        deadline = time.monotonic() + 20
        while not (api.edits and api.edits[-1]["text"] == final):
            assert time.monotonic() < deadline, api.edits
            time.sleep(0.05)
        took = time.monotonic() - started
        time.sleep(0.3)
    assert len(api.sent) == 1 and api.sent[0]["text"] == final  # one message, replaced
    previews = [e["text"] for e in api.edits[:-1]]
    assert previews and all(t.endswith(replies.UNFINISHED) for t in previews)
    assert all(html_problem(t) is None for t in previews + [final])
    # each preview longer than the one before: the text so far, as it grew
    assert all(len(a) < len(b) for a, b in zip(previews, previews[1:], strict=False))
    # at most one edit per EDIT_SECONDS (plus the final one); none refused but the 429
    assert len(api.edits) <= took / 0.3 + 2
    edits = [t for m, t in api.times if m == "editMessageText"]
    assert api.calls.count("editMessageText") == len(api.edits) + 1
    shown = edits[1:-1]  # the previews after the 429, before the final text
    assert all(b - a >= 0.25 for a, b in zip(shown, shown[1:], strict=False))
    # the 429 asked for 1 s: no edit came sooner after it, not even the final one
    assert edits[1] - edits[0] >= 0.95


@pytest.mark.slow
def test_a_quick_reply_is_one_message_never_edited(tmp_path):
    with BotApi() as api, served(tmp_path, api, {"dmPolicy": "open"},
                                 provider=Streaming(0.0)) as _:
        api.dm("plan it")
        assert api.wait_sent(1)[0]["text"] == split.parts(REPLY)[0]
        time.sleep(0.3)
    assert api.edits == [] and len(api.sent) == 1
