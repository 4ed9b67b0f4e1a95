"""The reply-text helpers the guards share: echoed template tags, stray text."""

from __future__ import annotations

from clawd.context.replytext import without_echoed_tags


def test_echoed_template_tags_are_taken_out():
    assert without_echoed_tags("<tools></tools>Noted: 2400 euros.") == "Noted: 2400 euros."
    assert without_echoed_tags("Sure.\n<tool_response>\n</tool_response>\nDone.") == \
        "Sure.\nDone."


def test_tags_inside_a_code_block_are_the_answers_own():
    """XML the user asked for keeps its ``<tools>`` element (a labelled good reply the
    guard once stripped: ``scripts/bench_guards.py``)."""
    xml = '```xml\n<tools>\n  <tool name="hammer"/>\n</tools>\n```'
    assert without_echoed_tags(xml) == xml
    mixed = "<tools>\nHere:\n  ```xml\n  <tools/>\n  ```\n<tool_response>"
    assert without_echoed_tags(mixed) == "Here:\n  ```xml\n  <tools/>\n  ```"
