"""Replies that read well on a phone: Markdown as Telegram's HTML subset, cut at 4096
characters on paragraph, line or code-block boundaries, never inside a tag, nothing lost;
and the pure policy around a channel's messages (session keys, who may talk)."""

from __future__ import annotations

import html
import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from clawd.channels import markup, split
from clawd.channels.access import verdict
from clawd.channels.base import Inbound
from clawd.channels.keys import session_key
from clawd.config import load_config
from clawd.config.channels import Telegram
from clawd.core.errors import ConfigError

TAG = re.compile(r"<[^>]+>")


def to_html(markdown: str) -> str:
    """A whole reply as one Telegram HTML text, uncut."""
    return "\n\n".join(markup.code_block(b.language, b.lines) if b.code else markup.block(b.lines)
                       for b in markup.blocks(markdown))


def shown(markup_text: str) -> str:
    """What a person reads, whitespace left out (a cut may fall on a blank or mid-word):
    tags gone, entities read."""
    return "".join(html.unescape(TAG.sub(" ", markup_text)).split())


def test_markdown_becomes_telegram_html_and_the_rest_is_escaped():
    out = to_html("# Plan\n\nUse **care** and *speed*, `a<b>` & [docs](https://x.org/?a=1&b=2)"
                         "\n- one\n- <two>\n\n> said\n\n```python\nif a < b:\n    pass\n```")
    assert out == ('<b>Plan</b>\n\nUse <b>care</b> and <i>speed</i>, <code>a&lt;b&gt;</code> '
                   '&amp; <a href="https://x.org/?a=1&amp;b=2">docs</a>\n• one\n• &lt;two&gt;'
                   '\n\n<blockquote>said</blockquote>\n\n<pre><code class="language-python">'
                   'if a &lt; b:\n    pass</code></pre>')


def test_markup_that_would_not_nest_is_shown_as_written():
    assert markup.inline("**a *b** c*") == "**a *b** c*"
    assert markup.inline("snake_case_name and 2*3*4") == "snake_case_name and 2*3*4"
    assert markup.inline("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;"


def test_a_7000_character_reply_arrives_in_parts_under_4096_with_nothing_lost():
    paragraphs = [f"Paragraph {n}: " + " ".join(f"word{n}x{i}" for i in range(60))
                  for n in range(13)]
    reply = "\n\n".join(paragraphs)
    assert 6900 < len(reply) < 9000
    parts = split.parts(reply)
    assert len(parts) >= 2 and all(len(p) < 4096 for p in parts)
    assert shown(" ".join(parts)) == shown(to_html(reply))
    # cut between paragraphs: each part starts a paragraph
    assert all(p.startswith("Paragraph ") for p in parts)


def test_a_long_code_block_is_cut_between_lines_each_part_its_own_pre():
    code = "\n".join(f"print('line {i} <&>')" for i in range(400))
    parts = split.parts(f"Here:\n\n```python\n{code}\n```\nDone.")
    assert len(parts) >= 2 and all(len(p) <= 4096 and markup.is_balanced(p) for p in parts)
    assert all(p.count("<pre>") == p.count("</pre>") for p in parts)
    inside = "".join(re.findall(r'<code class="language-python">(.*?)</code>',
                                "".join(parts), re.S))
    assert html.unescape(inside).replace("\n", "") == code.replace("\n", "")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(
    st.text(alphabet=st.sampled_from("ab <>&*_`~|#->[]()\n"), max_size=300),
    st.sampled_from(["```\n", "```py\n", "**bold** ", "`code` ", "[a](https://y.y) ",
                     "\n\n", "x" * 900, "- item\n", "> q\n"])), max_size=40),
       st.sampled_from([64, 200, 4096]))
@example(["~~~a"], 64)  # a fence on the last line opens no block: its words stay
def test_parts_fit_their_limit_nest_their_tags_and_lose_no_text(chunks, limit):
    reply = "".join(chunks)
    parts = split.parts(reply, limit)
    assert all(len(p) <= limit and markup.is_balanced(p) for p in parts)
    # every letter, < and & are read as sent (markers such as
    # * may turn into styling, and a style cannot reach across a cut: those are left out)
    assert letters(html.unescape(TAG.sub("", "".join(parts)))) == letters(reply)


def letters(text: str) -> str:
    return "".join(ch for ch in text if ch in "abx<&")  # > may be a quote mark


def message(**fields) -> Inbound:
    base = {"channel": "telegram", "update_id": 1, "chat_id": "42", "chat_type": "dm",
            "sender_id": "42", "sender_name": "@ann", "text": "hi"}
    return Inbound(**{**base, **fields})


def test_session_keys_a_person_a_group_a_topic_and_the_owner_in_main():
    assert session_key("main", message()) == "agent:main:telegram:dm:42"
    group = message(chat_type="group", chat_id="-1007", sender_id="5")
    assert session_key("main", group) == "agent:main:telegram:group:-1007"
    assert session_key("main", message(chat_type="group", chat_id="-1007", thread=3)) == \
        "agent:main:telegram:group:-1007:topic:3"
    assert session_key("main", message(), dm_scope="main", owner=True) == "agent:main:main"
    assert session_key("main", message(), dm_scope="main") == "agent:main:telegram:dm:42"


def test_who_may_talk():
    rules = Telegram.model_validate({"allowFrom": ["@Ann", "7"],
                                     "groups": {"-100": {}, "-200": {"requireMention": False}}})
    assert verdict(rules, message(), set()) == "answer"  # by @name, any case
    assert verdict(rules, message(sender_id="7", sender_name=None), set()) == "answer"
    stranger = message(sender_id="9", sender_name="@eve")
    assert verdict(rules, stranger, set()) == "pair"
    assert verdict(rules, stranger, {"9"}) == "answer"
    allowlist = rules.model_copy(update={"dm_policy": "allowlist"})
    assert verdict(allowlist, stranger, {"9"}) == "refuse"
    assert verdict(rules.model_copy(update={"dm_policy": "open"}), stranger, set()) == "answer"
    assert verdict(rules.model_copy(update={"dm_policy": "disabled"}), message(), set()) == \
        "refuse"
    group = message(chat_type="group", chat_id="-100", sender_id="9")
    assert verdict(rules, group, set()) == "ignore"  # not mentioned
    assert verdict(rules, message(chat_type="group", chat_id="-100", mentioned=True),
                   set()) == "answer"
    assert verdict(rules, message(chat_type="group", chat_id="-200"), set()) == "answer"
    assert verdict(rules, message(chat_type="group", chat_id="-300", mentioned=True),
                   set()) == "ignore"  # not listed
    anywhere = Telegram.model_validate({"groups": {"*": {}}})
    assert verdict(anywhere, message(chat_type="group", chat_id="-300", mentioned=True),
                   set()) == "answer"


def test_who_is_answered_in_a_group():
    rules = Telegram.model_validate({
        "allowFrom": ["@owner"],
        "groups": {"-100": {"allowFrom": ["@Ann", "7"]}, "-200": {"allowFrom": ["*"]},
                   "-300": {"allowFrom": []}, "-400": {}}})

    def said(chat: str, sender: str, name: str | None, linked: bool = False) -> str:
        return verdict(rules, message(chat_type="group", chat_id=chat, sender_id=sender,
                                      sender_name=name, mentioned=True), set(), linked)

    # a group's own list: only those it names, by @name (any case) or id
    assert said("-100", "42", "@ann") == "answer" and said("-100", "7", None) == "answer"
    assert said("-100", "9", "@eve") == "ignore"  # a stranger: silence, never a refusal
    assert said("-100", "1", "@owner") == "ignore"  # the channel's list is not added to it
    assert said("-200", "9", "@eve") == "answer"  # "*": every member
    assert said("-300", "42", "@ann") == "ignore"  # an empty list: nobody
    # no list of its own: the channel's allowFrom (and linked people)
    assert said("-400", "1", "@owner") == "answer"
    assert said("-400", "9", "@eve") == "ignore"
    assert said("-400", "9", "@eve", linked=True) == "answer"
    # neither list: anyone in a listed group, as before
    anyone = Telegram.model_validate({"groups": {"*": {}}})
    assert verdict(anyone, message(chat_type="group", chat_id="-5", sender_id="9",
                                   sender_name=None, mentioned=True), set()) == "answer"
    # pairing is for direct messages: an approved stranger is not thereby in a group
    assert verdict(rules, message(chat_type="group", chat_id="-400", sender_id="9",
                                  mentioned=True), {"9"}) == "ignore"


def test_a_bad_group_allow_from_entry_is_a_clear_config_error(tmp_path):
    path = tmp_path / "clawd.json"
    path.write_text('{channels: {telegram: {groups: {"-100": {allowFrom: ["@ann", "ann"]}}}}}')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == (
        f"{path}: bad value for 'channels.telegram.groups.-100.allowFrom': 'ann' is neither a "
        f"Telegram user id (digits) nor an @name, nor \"*\" (every member)")
    path.write_text('{channels: {telegram: {allowFrom: ["*"]}}}')  # "*" is a group's only
    with pytest.raises(ConfigError, match="'channels.telegram.allowFrom': '\\*' is neither"):
        load_config(path)
    path.write_text('{channels: {telegram: {groups: {"-100": {allowFrom: [" @ann ", "*"]}}}}}')
    assert load_config(path).channels.telegram.groups["-100"].allow_from == ["@ann", "*"]
