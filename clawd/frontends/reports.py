"""What the slash commands and ``clawd memory`` show, as text: reports built from a session,
the memory index and the history. Pure formatting: nothing here prints or changes state.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from clawd.context.layers import report
from clawd.core.messages import parse_iso, shown_time
from clawd.core.textcut import shorten
from clawd.memory.forget import Forgotten, NoteLine
from clawd.memory.interface import SearchResults
from clawd.sessions.transcript import History
from clawd.workspace.files import MEMORY_DIR, MEMORY_FILE
from clawd.workspace.interface import Stat, WorkspaceFiles, markdown_under

if TYPE_CHECKING:
    from clawd.loop.consolidate import ConsolidationReport
    from clawd.loop.session import Session


def one_line(text: str, width: int = 80) -> str:
    """One line of at most ``width`` characters (no blank before the ellipsis)."""
    line = " ".join(text.split())
    return line if len(line) <= width else shorten(line, width - 1, "").rstrip() + "…"


def format_recap(history: History, pairs: int = 3) -> str:
    """The last ``pairs`` exchanges (your message, the answer), one short line each, shown
    when a session is reopened; "" for a session with none."""
    messages = history.messages
    starts = [i for i, m in enumerate(messages) if m.role == "user"]
    if not starts:
        return "· earlier turns are summarised (compacted)" if history.summary else ""
    earlier = len(starts) > pairs or history.summary is not None
    lines = ["· where this session left off" + (" (earlier turns not shown):" if earlier
                                                 else ":")]
    shown = starts[-pairs:]
    for start, end in zip(shown, shown[1:] + [len(messages)]):
        lines.append(f"  you: {one_line(messages[start].text)}")
        turn = [m for m in messages[start + 1:end] if m.role == "assistant"]
        answer = next((m for m in reversed(turn) if m.text.strip()), None)
        tools = sorted({c.name for m in turn for c in m.tool_calls})
        if answer is not None:
            text = one_line(answer.text) + (" (interrupted)" if answer.aborted else "")
        else:
            text = f"(used {', '.join(tools)}; no answer in words)" if tools else "(no answer)"
        lines.append(f"  assistant: {text}")
    return "\n".join(lines)


def format_memory_results(found: SearchResults) -> str:
    """Search results as text: location and score, then the snippet, indented."""
    rows = found.get("results") or []
    head = f"{len(rows)} result{'s' * (len(rows) != 1)} ({found.get('mode', 'hybrid')}"
    head += f", {found['provider']}/{found['model']}" if found.get("provider") else ""
    head += f", fallback: {found['fallback']}" if found.get("fallback") else ""
    lines = [head + ")"]
    for r in rows:
        lines.append(f"\n{r['path']}:{r['startLine']}-{r['endLine']}  score {r['score']:.2f}")
        lines += [f"  {line}" for line in r["snippet"].splitlines()]
    return "\n".join(lines)


def format_memory_status(status: dict) -> str:
    """The memory index's state (``MemoryIndex.status()``) as aligned lines."""
    vector = status["vector"]
    model = "/".join(str(x) for x in (status.get("provider"), status.get("model")) if x)
    if vector["mode"] == "vec0":
        search = " ".join(x for x in ("sqlite-vec", vector.get("extension"), "(vec0)") if x)
    else:
        search = {"in-process": "in-process cosine (sqlite-vec unavailable)",
                  "off": "in-process cosine (store.vector.enabled is false)"}[vector["mode"]]
    # A new process has not compared the index with the files yet: it does before a search.
    synced = parse_iso((status.get("lastSync") or {}).get("at"))
    when = synced.astimezone().strftime("%Y-%m-%d %H:%M") if synced else None
    recheck = (" (files are checked again before the next search)"
               if status.get("syncOnSearch", True)
               else " (run clawd memory index to check the files again)")
    if not status["dirty"]:
        state = "up to date" + (f" (synced {when})" if when else "")
    elif when is None and not status["files"]:
        state = "not indexed yet" + recheck.replace("checked again", "indexed")
    else:
        state = (f"last synced {when}" if when else "indexed earlier") + recheck
    rows = [
        ("index", f"{status['path']} (agent {status['agentId']})"),
        ("workspace", status["workspace"]),
        ("sources", ", ".join(status.get("sources") or [])),
        ("files", f"{status['files']:,}"),
        ("chunks", f"{status['chunks']:,} ({status['embeddedChunks']:,} with vectors)"),
        ("embeddings", (model or "none") + (f" (dims {vector['dims']})" if vector.get("dims")
                                            else "")),
        ("vector search", search),
        ("keyword search", "FTS5" if status["fts"]["available"] else "unavailable (no FTS5)"),
        ("cache", f"{status['cacheEntries']:,} embeddings"),
        ("state", state + (", watching files" if status["watching"] else "")),
    ]
    skipped = status.get("skippedFiles") or []
    rows += [("skipped" if i == 0 else "", f"{s['path']} ({s['reason']})")
             for i, s in enumerate(skipped[:5])]
    if len(skipped) > 5:
        rows.append(("", f"... and {len(skipped) - 5} more (see --json)"))
    if status.get("fallback"):
        rows.append(("fallback", str(status["fallback"])))
    if status.get("embeddingError"):
        rows.append(("embedding error", str(status["embeddingError"])))
    if status.get("pendingBatches"):
        rows.append(("batch jobs", f"{status['pendingBatches']} pending "
                                   f"({status['pendingEmbeddings']:,} texts)"))
    width = max(len(k) for k, _ in rows) + 2
    return "\n".join(f"{key:<{width}}{value}" for key, value in rows)


def format_memory_files(files: WorkspaceFiles) -> str:
    """MEMORY.md, then the list of memory files with their sizes."""
    text = files.read(MEMORY_FILE)
    text = "(no MEMORY.md yet)" if text is None else text
    listing = [f"  {path:<40} {(files.stat(path) or Stat('file', 0)).size:>8,} bytes"
               for path in markdown_under(files, MEMORY_DIR)]
    return f"{MEMORY_FILE}:\n{text.rstrip()}\n\nmemory files:\n" + (
        "\n".join(listing) or "  (none)")


def _fmt_age(created: str | None, now: datetime) -> str:
    start = parse_iso(created)
    if start is None:
        return "?"
    minutes = int((now - start).total_seconds() // 60)
    return f"{minutes // 1440}d {minutes // 60 % 24}h" if minutes >= 1440 else (
        f"{minutes // 60}h {minutes % 60}m" if minutes >= 60 else f"{minutes}m")


def format_status(session: Session) -> str:
    e, budget = session.entry, session.budget
    used = session.context_tokens()
    flushes = e.get("memoryFlushCount", 0)
    lines = [
        f"Model:       {session.model_ref}",
        f"Context:     {used:,} / {budget.context_window:,} tokens ({budget.percent(used):.1f}%)",
        f"Thresholds:  memory flush at {budget.flush_at:,} ({budget.percent(budget.flush_at):.0f}%)"
        f" · compaction at {budget.compact_at:,} ({budget.percent(budget.compact_at):.0f}%)",
        f"Compactions: {e.get('compactionCount', 0)} · memory flushes: {flushes}"
        + (f" (last {e['memoryFlushAt']})" if e.get("memoryFlushAt") else ""),
        f"Usage:       in {e.get('cumulativeInputTokens', 0):,} · out "
        f"{e.get('cumulativeOutputTokens', 0):,} · cache read "
        f"{e.get('cumulativeCacheReadTokens', 0):,} · cache write "
        f"{e.get('cumulativeCacheWriteTokens', 0):,} (this session)",
        f"Session:     {session.key} ({e.get('sessionId')}) · started "
        f"{shown_time(e.get('createdAt'))} · age "
        f"{_fmt_age(e.get('createdAt'), session.rt.clock())}",
        f"Workspace:   {session.rt.workspace}",
    ]
    return "\n".join(lines)


def format_context(session: Session, *, detail: bool) -> str:
    layers = session.layers()
    rep = report(layers, session.history.summary, session.history.messages, session.tool_specs,
                 session.pruned_results())
    window = session.budget.context_window
    ratio = session.token_ratio

    def scaled(tokens: int) -> int:  # in the provider's own tokens
        return round(tokens * ratio)

    tools_total = sum(t for _, t in rep.tools)
    rows = [("system prompt", rep.system_tokens), ("project context", rep.project_tokens),
            ("tool schemas", tools_total), ("compaction summary", rep.summary_tokens),
            (f"history ({rep.history_count} messages)", rep.history_tokens)]
    lines = [f"{name:<28} {scaled(tokens):>9,}" for name, tokens in rows]
    total = scaled(rep.total)
    lines.append(f"{'total (estimated)':<28} {total:>9,}  of {window:,} "
                 f"({100 * total / window:.1f}%)")
    if session.entry.get("lastModelCallAt"):
        lines.append(f"{'now, from provider usage':<28} {session.context_tokens():>9,}")
    if abs(ratio - 1) >= 0.005:
        lines.append(f"(estimates scaled ×{ratio:.2f} to the provider's token count)")
    if detail:
        lines.append("\nProject context files (raw chars → injected chars, tokens):")
        for f in rep.files:
            flag = "  TRUNCATED" if f.truncated else ""
            lines.append(f"  {f.name:<26} {f.raw_chars:>8,} → {f.injected_chars:>8,} chars "
                         f"{scaled(f.tokens):>7,} tok{flag}")
        if not rep.files:
            lines.append("  (none)")
        lines.append("Tool schemas:")
        lines += [f"  {name:<26} {scaled(tokens):>7,} tok" for name, tokens in rep.tools]
        lines += _mcp_lines(session, dict(rep.tools), scaled)
        lines.append("Pruned in the last request:")
        lines += [f"  {item}" for item in rep.pruned] or ["  (nothing)"]
    return "\n".join(lines)


def _mcp_lines(session: Session, tokens: dict[str, int], scaled: Callable[[int], int]
               ) -> list[str]:
    """Each MCP server's tools in the request: how many, their tokens, and how many the
    model is not told of (past its profile's count or the window's share)."""
    servers: dict[str, list[str]] = {}
    for spec in session.window.offered:
        if spec.origin:
            servers.setdefault(spec.origin, []).append(spec.name)
    if not servers:
        return []
    lines = ["MCP servers:"]
    for server, names in servers.items():
        told = [name for name in names if name in tokens]
        left = f", {len(names) - len(told)} not offered (profile or window cap)" if (
            len(told) < len(names)) else ""
        lines.append(f"  {server + f' ({len(told)} tools{left})':<26} "
                     f"{scaled(sum(tokens[n] for n in told)):>7,} tok")
    return lines


def format_consolidation(report: ConsolidationReport, *, show_diff: bool) -> str:
    """A consolidation run (``loop.consolidate.ConsolidationReport``): the diff, what was
    refused and why (the first five), and the one-line summary."""
    parts = [report.diff.rstrip("\n")] if show_diff and report.diff else []
    if report.refused:
        parts.append("refused:\n" + "\n".join(f"  - {why}" for why in report.refused[:5])
                     + (f"\n  … and {len(report.refused) - 5} more"
                        if len(report.refused) > 5 else ""))
    parts.append(report.message)
    return "\n".join(parts)


def format_forget_lines(what: str, lines: list[NoteLine]) -> str:
    """The note lines ``forget`` would remove, one per line with its place; ``what`` is the
    request as the user gave it."""
    if not lines:
        return f"nothing in the notes (MEMORY.md, memory/) matches {what}; nothing to forget"
    files = len({line.path for line in lines})
    head = f"to forget ({what}): {_plural(len(lines), 'line')} in {_plural(files, 'note')}"
    return "\n".join([head] + [f"  {line.path}:{line.number}  {line.text}" for line in lines])


def format_forgotten(done: Forgotten, elsewhere: list[str]) -> str:
    """What ``forget`` did, and where search still finds the text outside the notes
    (``elsewhere``: citations)."""
    files = len({line.path for line in done.lines})
    kept = ", ".join(v.ref for v in done.kept)
    text = (f"forgot {_plural(len(done.lines), 'line')} from {_plural(files, 'note')}; "
            f"what {'it' if files == 1 else 'each'} held before is kept in the backups "
            f"(clawd history restore {kept})")
    if done.index is not None:
        text += (f"; the memory index was updated: {_plural(done.index.get('chunks', 0), 'chunk')}"
                 f" indexed again, {_plural(done.index.get('cacheEntries', 0), 'embedding')} "
                 f"purged from the cache")
    if elsewhere:
        text += ("\nstill found outside the notes, which forget does not change: "
                 + ", ".join(elsewhere))
    return text


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' * (count != 1)}"
