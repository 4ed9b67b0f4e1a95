"""``--deliver cli``: a run's reply is shown at the next REPL prompt, once, and the run's
delivery says so."""

from __future__ import annotations

import io
from datetime import timedelta

from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from clawd.automation import schedule as sched
from clawd.automation.jobs import new_job
from clawd.core.paths import state_dir
from clawd.frontends.cli.repl import repl_loop
from clawd.frontends.commands import Chat
from clawd.providers.scripted import ScriptedProvider
from clawd.scheduler.runner import Runner
from clawd.storage.files.jobs import FileJobs

from conftest import Clock, make_runtime


def test_a_cli_delivery_shows_at_the_next_prompt_once(tmp_path):
    clock = Clock()
    store = FileJobs(state_dir())
    runtime = make_runtime(tmp_path, ScriptedProvider(["Stretch now!", "hello"]), clock=clock)
    job = store.add(new_job("main", sched.at(clock.now + timedelta(minutes=20)), "stretch",
                            clock.now, name="stretch", deliver="cli"))
    clock.advance(minutes=20)
    Runner(store, lambda agent: runtime, clock).tick()
    out = io.StringIO()
    chat = Chat.open(runtime, "agent:main:main")
    with create_pipe_input() as pipe:
        pipe.send_text("hi\r/quit\r")
        code = repl_loop(chat, input=pipe, output=DummyOutput(), history=tmp_path / "h",
                         stream=out, color=False, warm=False)
    chat.session.close()
    assert code == 0
    assert out.getvalue().count("⏰ stretch: Stretch now!") == 1
    (run,) = store.runs(job["id"])
    assert run["delivery"]["status"] == "delivered"
    assert run["delivery"]["messageId"].startswith("cli:")
