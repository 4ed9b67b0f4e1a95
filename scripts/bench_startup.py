"""Start-up and loop-overhead benchmark, each number beside a baseline measured in the same run.

(a) ``clawd --help`` wall time against ``python -c pass``; (b) time from spawning ``clawd chat``
under a pseudo-terminal to the first prompt on screen, against python start-up plus
``import prompt_toolkit`` (the model is a custom ``openai-completions`` provider on a
127.0.0.1 URL that nothing listens on: no network is touched before the prompt); (c) the
loop's own cost per turn on a 2,000-message transcript, with the model's time excluded,
against the same loop on an empty transcript. Medians of N runs.

    python scripts/bench_startup.py [--runs N] [--turns N] [--messages N]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import select
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

TARGETS_MS = {"help": 150, "prompt": 500, "turn": 15}


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def wall(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    return time.perf_counter() - start


def clawd_command() -> list[str]:
    script = Path(sys.executable).with_name("clawd")
    found = str(script) if script.exists() else shutil.which("clawd")
    return [found] if found else [sys.executable, "-m", "clawd"]


def write_config(home: Path) -> None:
    workspace = home / "workspace"
    (workspace / "memory").mkdir(parents=True, exist_ok=True)
    config = {
        "agents": {"defaults": {"workspace": str(workspace), "model": "local/bench-model"}},
        "models": {"providers": {"local": {
            "api": "openai-completions", "baseUrl": "http://127.0.0.1:9/v1",
            "models": [{"id": "bench-model", "contextWindow": 32000}]}}},
    }
    home.mkdir(parents=True, exist_ok=True)
    (home / "clawd.json").write_text(json.dumps(config, indent=2), encoding="utf-8")


def time_to_prompt(cmd: list[str], env: dict[str, str], marker: bytes,
                   timeout: float = 30.0) -> float:
    """Seconds from spawning ``cmd`` on a pty until ``marker`` appears in its output."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, env=env,
                            start_new_session=True)
    os.close(slave)
    seen = b""
    try:
        while marker not in seen:
            left = start + timeout - time.perf_counter()
            if left <= 0 or proc.poll() is not None and not select.select([master], [], [], 0)[0]:
                raise RuntimeError(f"no prompt from {' '.join(cmd)}; output so far:\n"
                                   + seen.decode("utf-8", "replace"))
            ready, _, _ = select.select([master], [], [], min(left, 0.5))
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    data = b""
                if b"\x1b[6n" in data:  # answer the cursor-position request, as a terminal does
                    os.write(master, b"\x1b[1;1R")
                seen += data
        return time.perf_counter() - start
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        os.close(master)


# --- (c) loop overhead ----------------------------------------------------------------------

class TimedProvider:
    """Wraps a provider and adds up the time spent inside its stream, to subtract it."""

    def __init__(self, inner):
        self.inner, self.name, self.model = inner, inner.name, inner.model
        self.spent = 0.0

    def stream(self, request):
        start = time.perf_counter()
        iterator = iter(self.inner.stream(request))
        try:
            while True:
                try:
                    item = next(iterator)
                except StopIteration:
                    return
                self.spent += time.perf_counter() - start
                yield item
                start = time.perf_counter()
        finally:
            self.spent += time.perf_counter() - start


def fill_transcript(session, count: int) -> None:
    """``count`` messages of a realistic conversation: prose, and now and then a file read."""
    from clawd.core.messages import Message
    from clawd.providers.scripted import tool

    prose = ("We looked at the deployment notes again and agreed to keep the staging "
             "cluster on the old version until the migration script has been reviewed. ")
    written = 0
    while written < count:
        n = written // 2
        session.transcript.append_message(Message.user(f"Question {n}: {prose[:120]}"))
        written += 1
        if n % 10 == 9 and written + 3 <= count:
            call = tool("read", path=f"notes/file-{n}.md")
            session.transcript.append_message(Message.assistant("", [call]))
            session.transcript.append_message(Message.tool_result(call, prose * 12))
            written += 2
        if written < count:
            session.transcript.append_message(Message.assistant(f"Answer {n}. {prose * 3}"))
            written += 1


def loop_overhead(root: Path, messages: int, turns: int) -> tuple[float, float, float]:
    """(first turn, median turn, load) in seconds of loop time, the model's time excluded."""
    from clawd.config import AgentDefaults, Config
    from clawd.frontends.commands import Chat
    from clawd.loop.runtime import Runtime, fixed_models
    from clawd.providers.scripted import ScriptedProvider
    from clawd.storage.files.storage import FileStorage
    from clawd.tools.exec import exec_tool
    from clawd.tools.files import file_tools
    from clawd.workspace.init import apply, plan_init

    workspace = root / "workspace"
    apply(plan_init(root / "state", root / "state" / "clawd.json", workspace))
    provider = TimedProvider(ScriptedProvider(default="Noted; nothing else to add.",
                                              chunk_size=16))
    settings = AgentDefaults.model_validate({"workspace": str(workspace)})
    runtime = Runtime(config=Config(), agent_id="main", settings=settings,
                      workspace=workspace,
                      storage=FileStorage("main", workspace, root / "state" / "sessions"),
                      models=fixed_models(provider, 1_000_000),
                      tools=file_tools() + [exec_tool()])
    fill_transcript(Chat.open(runtime, "agent:main:main").session, messages)
    start = time.perf_counter()
    chat = Chat.open(runtime, "agent:main:main")
    load = time.perf_counter() - start
    assert len(chat.session.history.messages) == messages, len(chat.session.history.messages)
    samples = []
    for i in range(turns + 1):
        provider.spent = 0.0
        start = time.perf_counter()
        events = list(chat.handle(f"turn {i}: anything new?"))
        samples.append(time.perf_counter() - start - provider.spent)
        assert type(events[-1]).__name__ == "TurnDone", events
    return samples[0], statistics.median(samples[1:]), load


def row(label: str, value_ms: float, baseline_label: str, baseline_ms: float,
        target: int | None) -> str:
    verdict = "" if target is None else (f"  target ≤ {target} ms: "
                                         + ("ok" if value_ms <= target else "MISSED"))
    return (f"{label:<44} {value_ms:8.1f} ms   | {baseline_label:<40} {baseline_ms:8.1f} ms"
            f"   (+{value_ms - baseline_ms:.1f}){verdict}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="runs per start-up measurement")
    parser.add_argument("--turns", type=int, default=30, help="turns per overhead measurement")
    parser.add_argument("--messages", type=int, default=2000)
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="clawd-bench-"))
    try:
        home = root / "home"
        write_config(home / ".clawd")
        env = {**os.environ, "HOME": str(home), "CLAWD_HOME": str(home / ".clawd"),
               "TERM": "xterm-256color", "LANG": os.environ.get("LANG", "C.UTF-8")}
        for key in ("CLAWD_CONFIG", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL"):
            env.pop(key, None)
        py, clawd = sys.executable, clawd_command()
        from clawd.frontends.cli.repl import PROMPT
        marker = PROMPT.strip().encode()  # the renderer styles the trailing space apart

        wall(clawd + ["--help"], env)  # warm the OS file cache
        time_to_prompt(clawd + ["chat"], env, marker)
        help_ms = median_ms([wall(clawd + ["--help"], env) for _ in range(args.runs)])
        pass_ms = median_ms([wall([py, "-c", "pass"], env) for _ in range(args.runs)])
        prompt_ms = median_ms([time_to_prompt(clawd + ["chat"], env, marker)
                               for _ in range(args.runs)])
        ptk_ms = median_ms([wall([py, "-c", "import prompt_toolkit"], env)
                            for _ in range(args.runs)])

        os.environ.update(HOME=str(home), CLAWD_HOME=str(home / ".clawd"))
        os.environ.pop("CLAWD_CONFIG", None)
        from clawd.core.tokens import encoder_name
        encoder = encoder_name()  # the tokenizer loads once, before anything is timed
        big_first, big, big_load = loop_overhead(root / "big", args.messages, args.turns)
        empty_first, empty, empty_load = loop_overhead(root / "empty", 0, args.turns)

        print(f"clawd start-up benchmark — {args.runs} runs each, medians; python "
              f"{sys.version.split()[0]}, {os.cpu_count()} CPUs, load "
              f"{os.getloadavg()[0]:.2f}, tokenizer {encoder}")
        print(row("(a) clawd --help", help_ms, "python -c pass", pass_ms, TARGETS_MS["help"]))
        print(row("(b) clawd chat → first prompt (pty)", prompt_ms,
                  "python -c 'import prompt_toolkit'", ptk_ms, TARGETS_MS["prompt"]))
        print(row(f"(c) loop overhead/turn, {args.messages:,} messages", big * 1000,
                  "same, empty transcript", empty * 1000, TARGETS_MS["turn"]))
        print(row(f"    first turn after load, {args.messages:,} messages", big_first * 1000,
                  "same, empty transcript", empty_first * 1000, None))
        print(row(f"    session load, {args.messages:,} messages", big_load * 1000,
                  "same, empty transcript", empty_load * 1000, None))
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
