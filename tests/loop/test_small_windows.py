"""Small windows: budgets as shares of the window, workspace files within their share, a
window too small refused up front, a message too large refused before anything is sent."""

from __future__ import annotations

import json

import pytest

from clawd.core.errors import ClawdError
from clawd.core.events import Compacted, ErrorEvent
from clawd.core.tokens import estimate_text, make_budget
from clawd.frontends import cli
from clawd.loop.session import Session
from clawd.providers.scripted import ScriptedProvider
from clawd.workspace.files import ContextFile, fit_files

from conftest import make_runtime, transcript_lines
from loopmodel import LoopModel, filler

KEY = "agent:main:main"
DAILY = "memory/2026-11-22.md"
pytestmark = pytest.mark.usefixtures("both_storages")

# window -> (flush at, compact at, kept verbatim, workspace files, summary) with defaults
DEFAULT_BUDGETS = {
    8_192: (5_120, 6_144, 1_228, 1_638, 819),
    16_384: (10_240, 12_288, 2_457, 3_276, 1_638),
    32_768: (20_576, 24_576, 4_915, 6_553, 3_276),
    128_000: (104_000, 108_000, 19_200, 25_600, 4_096),
    200_000: (176_000, 180_000, 20_000, 40_000, 4_096),
}


@pytest.mark.parametrize("window", sorted(DEFAULT_BUDGETS))
def test_default_budgets_scale_with_the_window(window):
    b = make_budget(window, 20_000, 4_000, keep_recent_tokens=20_000, max_tokens=4096)
    assert (b.flush_at, b.compact_at, b.keep_recent, b.files, b.summary) == \
        DEFAULT_BUDGETS[window]
    assert 0 < b.flush_at <= b.compact_at < window


# --- workspace files within their share -----------------------------------------------------

def test_daily_logs_keep_their_newest_lines_with_a_marker():
    log = "".join(f"- note {i}: {filler(12, i)}\n" for i in range(300))
    files = [ContextFile("AGENTS.md", 40, "Be brief.\n" * 4, False),
             ContextFile("memory/2026-11-21.md", len(log), log, False),
             ContextFile(DAILY, len(log), log, False)]
    fitted = fit_files(files, 1500, estimate_text)
    assert sum(estimate_text(f.text) for f in fitted) <= 1500
    assert fitted[0].text == files[0].text  # bootstrap files untouched while logs can give
    yesterday, today = fitted[1].text, fitted[2].text
    assert yesterday.startswith("[... the 300 older lines of memory/2026-11-21.md")
    assert today.startswith("[... the ") and "read path=memory/2026-11-22.md offset=1" in today
    assert today.endswith("- note 299: " + filler(12, 299) + "\n")  # the newest line kept


def test_other_files_shrink_with_a_marker_when_logs_are_not_enough():
    big = "x " * 20_000
    files = [ContextFile("AGENTS.md", len(big), big, False),
             ContextFile("MEMORY.md", len(big), big, False)]
    fitted = fit_files(files, 2000, estimate_text)
    assert sum(estimate_text(f.text) for f in fitted) <= 2000
    assert all(f.truncated and f"{f.name} truncated" in f.text for f in fitted)


def test_after_compaction_the_context_is_under_the_compaction_point(tmp_path):
    """The 8k case: a big daily log no longer keeps the context over the window."""
    provider = ScriptedProvider(default=LoopModel(lossy=True))
    runtime = make_runtime(tmp_path, provider, window=8000)
    runtime.files.write(
        DAILY, "".join(f"- {i}: {filler(20, i)}\n" for i in range(900)))  # ~21k tokens
    session = Session.open(runtime, KEY)
    compactions = []
    for i in range(25):
        events = list(session.run_turn(f"Turn {i}. {filler(150, i)}"))
        assert not [e for e in events if isinstance(e, ErrorEvent)]
        compactions += [e for e in events if isinstance(e, Compacted)]
    assert compactions
    assert all(c.tokens_after < session.budget.compact_at for c in compactions)
    project = provider.requests[-1].system[1]
    assert estimate_text(project) <= session.budget.files + 100
    assert "older lines of memory/2026-11-22.md are not shown" in project


# --- refusals before anything is sent -------------------------------------------------------

def test_a_window_too_small_is_refused_before_the_session(tmp_path):
    provider = ScriptedProvider(["never"])
    runtime = make_runtime(tmp_path, provider, window=2000)
    with pytest.raises(ClawdError, match=r"a context window of 2,000 tokens is too small.*"
                                         r"models\.providers\.anthropic\.models\[\]\.contextWindow"):
        Session.open(runtime, KEY)
    assert not runtime.store.get(KEY) and not provider.requests


def test_the_cli_refuses_a_window_too_small_in_one_line(isolated_home, capsys):
    workspace = isolated_home / "ws"
    (workspace / "memory").mkdir(parents=True)
    (isolated_home / ".clawd").mkdir()
    (isolated_home / ".clawd" / "clawd.json").write_text(json.dumps({
        "agents": {"defaults": {"workspace": str(workspace), "model": "local/tiny",
                                "memorySearch": {"enabled": False}}},
        "models": {"providers": {"local": {"api": "openai-completions",
                                           "baseUrl": "http://127.0.0.1:9/v1",
                                           "models": [{"id": "tiny", "contextWindow": 1500}]}}}}))
    assert cli.main(["chat", "-m", "hi"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "too small" in err
    assert "models.providers.local.models[].contextWindow, at least 3,072" in err


def test_a_message_larger_than_the_window_is_refused_with_its_size(tmp_path):
    provider = ScriptedProvider(["Short answer."])
    runtime = make_runtime(tmp_path, provider, window=8000)
    session = Session.open(runtime, KEY)
    huge = filler(9000)
    events = list(session.run_turn(huge))
    errors = [e.message for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 1 and errors[0].startswith("your message is ")
    assert "tokens and cannot fit: the model's window is 8,000 tokens" in errors[0]
    assert "nothing was sent" in errors[0] and session.transcript.location in errors[0]
    assert not provider.requests
    entries = transcript_lines(session)
    assert entries[-1]["refused"] is True and entries[-1]["content"][0]["text"] == huge
    assert session.history.messages == [] and Session.open(runtime, KEY).history.messages == []
    events = list(session.run_turn("a short one"))  # the session goes on
    assert events[-1].text == "Short answer."


def test_the_workspace_template_fits_an_8k_window_untruncated(tmp_path):
    from clawd.workspace.template import template_files

    provider = ScriptedProvider(["Hello."])
    runtime = make_runtime(tmp_path, provider, window=8192)
    for rel, resource in template_files():  # as clawd init (or clawd users add) lays it down
        runtime.files.create(rel, resource.read_text(encoding="utf-8"))
    session = Session.open(runtime, KEY)
    layers = session.layers()
    assert layers.files and not any(f.truncated for f in layers.files)
    assert "# End of the workspace files" in layers.project[-400:]


def test_files_and_a_window_that_surely_fit_need_no_tokenizer(tmp_path, monkeypatch):
    """The tokenizer takes most of a second to load: a start-up whose fixed layers fit by
    their byte count alone (a token is at least a byte) does not wait for it."""
    from clawd.core.tokens import at_most
    from clawd.loop import runtime as runtime_module

    assert at_most("naïve 東京 🙂") >= len("naïve 東京 🙂".encode()) > len("naïve 東京 🙂")

    def no_count(text):
        raise AssertionError("counted with the tokenizer")

    files = [ContextFile("AGENTS.md", 800, "be kind " * 100, False)]
    assert fit_files(files, 10_000, no_count) == files
    rt = make_runtime(tmp_path, ScriptedProvider([]), window=200_000)
    monkeypatch.setattr(runtime_module, "estimate_text", no_count)
    monkeypatch.setattr(runtime_module, "estimate_tools", no_count)
    Session.open(rt, "agent:main:main")  # opened without counting
    small = make_runtime(tmp_path / "small", ScriptedProvider([]), window=2_000)
    with pytest.raises(AssertionError, match="counted"):  # close to the limit: counted
        Session.open(small, "agent:main:main")
