"""The README's install and test commands: they work where the system Python is externally
managed (a virtual environment, ``python3`` only) and CI runs exactly them."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```sh\n(.*?)```", text, re.DOTALL)
    assert block, "the README starts with a sh block of the install and test commands"
    return [line.strip() for line in block.group(1).splitlines() if line.strip()]


STATIC_CHECKS = [".venv/bin/python -m ruff check clawd scripts tests", ".venv/bin/python -m mypy"]
# Before them, CI installs the system's Chromium for the web chat's browser tests (which are
# skipped, saying why, where it is missing); the README says so under its two commands.
CHROMIUM = ("command -v chromium >/dev/null || (apt-get update && "
            "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium)")


def test_ci_runs_exactly_the_readme_commands():
    """Chromium, then the README's install and test commands, as written, then the static
    checks."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    body = [line.strip() for line in ci if line.strip() and not line.startswith("#")
            and not line.startswith(("set ", "cd "))]
    assert body == [CHROMIUM] + readme_commands() + STATIC_CHECKS
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "apt-get install chromium" in readme


def test_readme_commands_need_neither_python_nor_a_system_wide_pip():
    commands = readme_commands()
    assert len(commands) == 2
    install, test = commands
    assert install.startswith("python3 -m venv .venv && ")
    for command in commands:
        programs = [part.split()[0] for part in re.split(r"&&|;|\|", command)]
        # a bare `python` may not exist; a bare `pip` installs into the managed system Python
        assert not {"python", "pip", "pip3"} & set(programs), command
    assert ".venv/bin/python -m pip install -e" in install
    assert test == ".venv/bin/python -m pytest"


def test_the_readme_fits_a_page_per_idea():
    """A newcomer's README: what it is, install, a first chat, the gateway, where the docs
    are; the details live in docs/ (each link there resolves)."""
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    for target in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / target).exists(), target
