"""The command line's commands other than ``chat`` and ``sessions``: ``init``, ``memory``
(``forget`` asks on the terminal before it removes anything),
``models`` and ``doctor``. Like ``clawd.frontends.cli`` (which parses the flags and maps
errors to exit codes) this is a front end: it prints. Heavy modules are imported inside
the commands.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from clawd.frontends.compose import build_runtime

# --- init -----------------------------------------------------------------------------------

def cmd_init(args: argparse.Namespace) -> int:
    from clawd.config import config_path, load_config, state_dir
    from clawd.workspace.init import apply, init_target, plan_init

    config_file = config_path()
    config = load_config(config_file) if config_file.exists() else None
    agent, workspace = init_target(config, args.agent, args.workspace)
    actions = plan_init(state_dir(), config_file, workspace, agent)
    done = actions if args.dry_run else apply(actions)
    for action in done:
        print(action.describe())
    if not args.dry_run:
        created = sum(1 for a in done if a.status == "created" and a.kind != "edit")
        kept = sum(1 for a in done if a.status == "exists")
        print(f"{created} created, {kept} kept. Workspace: {workspace}")
        print(next_step(load_config(config_file), agent))
    return 0


def next_step(config: Any, agent_id: str, env: Any = None) -> str:
    """What to do after ``clawd init``: ``clawd chat``, once the agent's model is usable (a key
    in the environment or the config, or a declared server); before that, the exact lines
    that set a key or declare a local OpenAI-compatible server."""
    import os

    from clawd.config import resolve_agent
    from clawd.core.errors import MissingKeyError, ProviderSetupError
    from clawd.providers import registry
    from clawd.workspace.init import local_server_example

    env = os.environ if env is None else env
    chat = "clawd chat" + (f" --agent {agent_id}" if agent_id != config.default_agent_id()
                           else "")
    model = resolve_agent(config, agent_id)[1].model
    try:
        registry.resolve(config, model, env=env)
    except MissingKeyError:
        pass
    except ProviderSetupError as exc:
        return f"Next: {exc}; then {chat}"
    else:
        return f"Next: {chat}"
    provider = registry.split_ref(model)[0]
    snippet, local_model = local_server_example()
    server = "\n".join("    " + line for line in snippet.splitlines())
    return (f"Next: {model} needs an API key; set it in your shell:\n"
            f"    export {registry.key_variable(provider)}=...\n"
            f"or run a local OpenAI-compatible server (Ollama, vLLM, llama.cpp) and declare "
            f"it in {config.source}, under models.providers:\n{server}\n"
            f"and under agents.defaults:\n"
            f"    model: \"{local_model}\",\n"
            f"Then:\n    {chat}")


# --- memory ---------------------------------------------------------------------------------

def cmd_memory(args: argparse.Namespace) -> int:
    from clawd.config import load_config
    from clawd.frontends.reports import format_memory_results, format_memory_status

    runtime = build_runtime(load_config(), args.agent)
    if args.memory_command == "consolidate":
        return _consolidate(runtime, args)
    if args.memory_command == "forget":
        return _forget(runtime, args)
    index = runtime.memory
    if index is None:
        from clawd.core.errors import ClawdError
        raise ClawdError("memory search is off for this agent (memorySearch.enabled)")
    try:
        if args.memory_command == "status":
            status = index.status()
            print(json.dumps(status, indent=2, ensure_ascii=False) if args.json
                  else format_memory_status(status))
        elif args.memory_command == "index":
            bar = ProgressBar(sys.stderr)
            try:
                done = index.sync(force=args.force, progress=bar)
            finally:
                bar.end()
            print(format_index_summary(done))
        else:
            found = index.search(args.query, max_results=args.max_results,
                                 min_score=args.min_score)
            print(json.dumps(found, indent=2, ensure_ascii=False) if args.json
                  else format_memory_results(found))
    finally:
        index.close()
    return 0


def _consolidate(runtime: Any, args: argparse.Namespace) -> int:
    from clawd.core.errors import ClawdError
    from clawd.frontends.reports import format_consolidation
    from clawd.loop.consolidate import consolidate, refusal

    try:
        model = runtime.models(args.model or runtime.settings.model)
        if (why := refusal(model)) is not None:
            raise ClawdError(f"not consolidated: {why}")
        report = consolidate(runtime, model.connect(), dry_run=args.dry_run, since=args.since)
    finally:
        if runtime.memory is not None:
            runtime.memory.close()
    print(format_consolidation(report, show_diff=True))
    return 0


def _forget(runtime: Any, args: argparse.Namespace) -> int:
    """List the lines, ask (unless ``--yes``), remove them and purge the index."""
    from clawd.core.errors import ClawdError
    from clawd.frontends.reports import format_forget_lines, format_forgotten
    from clawd.memory import forget

    try:
        access = runtime.settings.workspace_access
        if access != "rw":
            raise ClawdError(f"the workspace is read-only here (workspaceAccess: \"{access}\"); "
                             f"nothing was forgotten")
        request = forget.parse(args.target)
        lines = forget.find(runtime.files, request)
        print(format_forget_lines(request.describe(), lines))
        if not lines:
            return 0
        if not args.yes and not _confirmed(len(lines)):
            print("nothing was forgotten")
            return 0
        done = forget.forget(runtime.files, runtime.backups, runtime.memory, lines,
                             runtime.clock())
        print(format_forgotten(done, forget.still_found(runtime.memory, request)))
    finally:
        if runtime.memory is not None:
            runtime.memory.close()
    return 0


def _confirmed(count: int) -> bool:
    """Asked on the terminal; without one, refused in one line (``--yes`` is the way)."""
    from clawd.core.errors import ClawdError

    if not sys.stdin.isatty():
        raise ClawdError("not forgotten: there is no terminal to confirm on; pass --yes to "
                         "remove these lines")
    try:
        answer = input(f"Remove {'this line' if count == 1 else f'these {count} lines'}? "
                       f"[y/N] ")
    except EOFError:
        answer = ""
    return answer.strip().lower() in ("y", "yes")


class ProgressBar:
    """``indexing [####......] 12/40 chunks`` redrawn in place; ``end`` ends its line (only
    if one was drawn), so whatever comes next starts on a line of its own."""

    def __init__(self, stream: Any, width: int = 30):
        self.stream, self.width, self.drawn = stream, width, False

    def __call__(self, done: int, total: int) -> None:
        if not total:
            return
        filled = int(self.width * done / total) if total else self.width
        self.stream.write(f"\rindexing [{'#' * filled}{'.' * (self.width - filled)}] "
                          f"{done}/{total} chunks")
        self.stream.flush()
        self.drawn = True

    def end(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = False


def format_index_summary(done: dict[str, Any]) -> str:
    """What a sync did, in a sentence or two (``MemoryIndex.sync``'s summary)."""
    if done.get("indexed") or done.get("removed") or done.get("rebuilt"):
        text = (f"{_count(done.get('files', 0), 'memory file')}: {done.get('indexed', 0)} "
                f"indexed ({_count(done.get('chunks', 0), 'chunk')}), "
                f"{done.get('removed', 0)} removed")
    else:
        text = f"{_count(done.get('files', 0), 'memory file')}, all up to date"
    if done.get("skipped"):
        text += f", {done['skipped']} skipped (see clawd memory status)"
    if done.get("rebuilt"):
        text += "; the index was rebuilt"
    vectors = []
    if done.get("embedded"):  # texts, not chunks: a long chunk is embedded in pieces too
        made = f"{done['embedded']} computed with {done.get('provider')}"
        if done["embedded"] != done.get("chunks"):
            made += " (one per chunk, and one per piece of a chunk with several sections)"
        vectors.append(made)
    if done.get("cached"):
        vectors.append(f"{done['cached']} from the cache")
    if done.get("submitted"):
        vectors.append(f"{done['submitted']} sent as batch jobs")
    if done.get("pendingBatches"):
        vectors.append(f"{done['pendingBatches']} batch jobs pending")
    if not done.get("provider"):
        vectors.append("no embeddings (keyword search only)")
    return text + "." + (f" Vectors: {', '.join(vectors)}." if vectors else "")


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'s' * (number != 1)}"


# --- models ---------------------------------------------------------------------------------

def model_rows(config: Any, env: Any = None) -> list[dict[str, Any]]:
    """Every configured provider (the built-ins and ``models.providers``) with its models:
    those declared, plus the agents' models of that provider."""
    import os

    from clawd.config import resolve_agent
    from clawd.core.errors import ProviderSetupError
    from clawd.providers import registry

    env = os.environ if env is None else env
    used: dict[str, list[str]] = {}  # model ref -> agents using it
    for agent_id in config.agent_ids():
        used.setdefault(resolve_agent(config, agent_id)[1].model, []).append(agent_id)
    names = list(registry.BUILTIN)
    for name in [*config.models.providers, *(ref.partition("/")[0] for ref in used)]:
        if name not in names:
            names.append(name)
    rows = []
    for name in names:
        declared = config.models.providers.get(name)
        refs = [f"{name}/{m.id}" for m in (declared.models if declared else [])]
        refs += [ref for ref in used if ref.startswith(name + "/") and ref not in refs]
        variable = registry.key_variable(name)
        has_key = bool((declared and declared.api_key) or env.get(variable))
        if name in registry.BUILTIN:
            key = f"set ({variable})" if has_key else f"not set ({variable})"
        else:
            key = "set" if has_key else "not needed"
        try:
            api, problem = registry.wire_api(config, f"{name}/-"), None
        except ProviderSetupError as exc:
            api, problem = None, str(exc)
        if problem is None and name not in registry.BUILTIN and not declared.base_url:
            problem = f"models.providers.{name}.baseUrl is not set"
        models = []
        for ref in refs:
            _, settings = resolve_agent(config, (used.get(ref) or [None])[0])  # type: ignore[list-item]
            info = registry.model_info(config, ref)
            cost = info.cost.model_dump(by_alias=True) if info and info.cost else None
            models.append({"ref": ref, "contextWindow": registry.context_window(
                config, settings, ref), "cost": cost, "agents": used.get(ref, [])})
        base_url = (declared.base_url if declared else None) or (
            env.get(registry.BUILTIN[name][2]) if name in registry.BUILTIN else None)
        rows.append({"provider": name, "api": api, "baseUrl": base_url, "key": key,
                     "keySet": has_key, "problem": problem, "models": models})
    return rows


def cmd_models(args: argparse.Namespace) -> int:
    from clawd.config import load_config

    rows = model_rows(load_config())
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    for row in rows:
        where = f" · {row['baseUrl']}" if row["baseUrl"] else ""
        print(f"{row['provider']} ({row['api'] or 'api not set'}) · key {row['key']}{where}")
        if row["problem"]:
            print(f"  problem: {row['problem']}")
        for model in row["models"]:
            extra = f"  price in/out ${model['cost']['input']:g}/${model['cost']['output']:g}" \
                f" per Mtok" if model["cost"] else ""
            agents = f"  model of agent {', '.join(model['agents'])}" if model["agents"] else ""
            print(f"  {model['ref']:<40} window {model['contextWindow']:>9,}{extra}{agents}")
        if not row["models"]:
            print("  (no models configured; any model id works with --model)")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    """One line per check; exit code 1 when any failed."""
    failed = False
    for ok, what, text in doctor_checks(args.agent):
        failed |= not ok
        print(f"{'ok  ' if ok else 'FAIL'}  {what}: {text}")
    return 1 if failed else 0


def doctor_checks(agent: str | None):
    """(ok, what, text) for the config, keys and servers, embedder, index and workspace."""

    from clawd.config import config_path, load_config, resolve_agent
    from clawd.core.errors import ClawdError
    from clawd.providers import registry

    path = config_path()
    try:
        config = load_config(path)
        agent_id, settings = resolve_agent(config, agent)
    except ClawdError as exc:
        yield False, "config", str(exc)
        return
    yield True, "config", (f"{path} is valid" if path.exists()
                           else f"{path} does not exist; using the defaults")
    refs = [settings.model] + [f"{name}/{p.models[0].id}" for name, p
                               in config.models.providers.items() if p.models and p.base_url]
    for ref in dict.fromkeys(refs):
        try:
            provider = registry.make_provider(config, ref, max_retries=0)
        except ClawdError as exc:
            yield False, f"model {ref}", str(exc)
            continue
        ok, text = provider.check()  # type: ignore[attr-defined]  # every adapter has it
        yield ok, f"model {ref}", text
    from clawd.frontends.cli.mcp import doctor_checks as mcp_checks

    yield from mcp_checks(config)
    from clawd.frontends.cli.channels import doctor_checks as channel_checks

    yield from channel_checks(config)
    try:
        runtime = build_runtime(config, agent_id)
    except ClawdError as exc:
        yield False, "storage" if config.storage.effective_url() else "agent", str(exc)
        return
    index = runtime.memory
    if index is None:
        yield True, "memory", "memory search is off for this agent"
    else:
        try:
            yield from index.check()
        finally:
            index.close()
    yield from runtime.storage.check(settings.workspace_access)
