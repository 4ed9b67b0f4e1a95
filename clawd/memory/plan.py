"""The first step of a sync: what changed since the index was last written.

Every source file is compared with its ``files`` row (size and mtime first, then the
content hash); what changed is read and chunked, what went away is to be removed. A change
of embedding signature or chunking (or ``force``) makes everything change: the index is
rebuilt. Chunks of unchanged files that still lack vectors (an earlier sync had no embedder,
or their batch job had not finished) are to be embedded too. Nothing is written here.

Files that cannot be indexed (not UTF-8 text, unreadable, links out of the workspace) are
skipped with one warning each. The ``skippedFiles`` meta row remembers them with their size
and mtime, so the warning comes again only when such a file changes (or on ``force``), not on
every sync of every process; ``MemoryIndex.status`` lists them.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from typing import Any

from clawd.config import MemorySearch
from clawd.memory.chunker import Chunk, chunk_text
from clawd.memory.sources import NotText, read_source
from clawd.memory.target import Target
from clawd.workspace.files import MEMORY_FILE, without_replaced
from clawd.workspace.template import template_lines

log = logging.getLogger(__name__)

SKIPPED_META = "skippedFiles"


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def chunking_signature(settings: MemorySearch) -> str:
    cfg = settings.chunking
    return json.dumps({"tokens": cfg.tokens, "overlap": cfg.overlap, "version": 6})


def own_chunks(key: str, text: str, tokens: int, overlap: int) -> list[Chunk]:
    """The chunks of the note ``key``, without those that hold nothing but headings and the
    lines of clawd's own templates (a fresh MEMORY.md's "- (preferences, habits, how they
    like to work)" is no memory, and it matched questions about preferences), and without
    MEMORY.md's ``## Replaced`` section (older values consolidation replaced: found first,
    they were given as current)."""
    template = template_lines()
    if key == MEMORY_FILE:
        text = without_replaced(text)
    return [chunk for chunk in chunk_text(text, tokens, overlap)
            if any(line.strip() not in template for line in chunk.text.splitlines()
                   if line.strip() and not line.lstrip().startswith("#"))]


@dataclass
class SyncPlan:
    """What a sync is to write."""

    chunking: str  # the chunking signature the index is written with
    stored_embedding: str | None  # the embedding signature the index was built with
    rebuild: bool
    files: int  # source files indexed (skipped ones left out)
    changed: list[tuple[Any, str, Any, list[Chunk]]]  # read and chunked again
    touched: list[tuple[Any, str, Any]]  # same content, new size or mtime
    removed: list[str]  # keys of files gone (or now skipped)
    skipped: dict[str, tuple[str, str]]  # key -> (reason, stamp of the file when skipped)
    missing: list[tuple[int, str, str, str]]  # (id, path, heading, text) of kept chunks
                                              # still without a vector

    @property
    def new_chunks(self) -> list[Chunk]:
        return [c for _, _, _, chunks in self.changed for c in chunks]

    def to_embed(self) -> list[Chunk]:
        """The new chunks, then the kept ones still missing their vectors."""
        return self.new_chunks + [Chunk(0, 0, text, heading)
                                  for _, _, heading, text in self.missing]


def make_plan(target: Target, embedding: str | None, force: bool = False) -> SyncPlan:
    """What changed; ``embedding`` is the signature of the embedder this sync uses (None
    without one: no vectors are then missed)."""
    store = target.store
    chunking = chunking_signature(target.settings)
    stored_embedding = store.get_meta("embedding")
    rebuild = force or store.get_meta("chunking") != chunking or (
        embedding is not None and stored_embedding is not None and embedding != stored_embedding)

    target.check()
    links: dict[str, str] = {}
    sources = target.sources.sources(target.settings, links)
    known = store.files()
    warned = skipped_files(store)
    # key -> (reason, stamp): the stamp tells whether a skipped file changed since.
    skipped: dict[str, tuple[str, str]] = {key: (reason, "") for key, reason in links.items()}
    changed: list[tuple[Any, str, Any, list[Chunk]]] = []
    touched: list[tuple[Any, str, Any]] = []
    for source in sources:
        stamp = ""
        try:
            stat = source.stat()
            stamp = f"{stat.st_size}:{stat.st_mtime_ns}"
            before = warned.get(source.key)
            if not force and before and before[1] == stamp:
                skipped[source.key] = before  # still the same file: no second warning
                continue
            previous = known.get(source.key)
            if not rebuild and _same_stat(previous, stat):
                continue
            text = read_source(source)
        except NotText as exc:
            skipped[source.key] = (str(exc), stamp)
            continue
        except OSError as exc:
            skipped[source.key] = (f"cannot read: {exc.strerror or exc}", stamp)
            continue
        digest = text_hash(text)
        if not rebuild and previous and previous[1] == digest:
            touched.append((source, digest, stat))
            continue
        cfg = target.settings.chunking
        chunks = own_chunks(source.key, text, cfg.tokens, cfg.overlap)
        changed.append((source, digest, stat, chunks))
    keys = {s.key for s in sources} - set(skipped)
    removed = [key for key in known if key not in keys]
    for key, (reason, stamp) in sorted(skipped.items()):
        if force or warned.get(key) != (reason, stamp):
            log.warning("memory index: skipping %s (%s)", key, reason)

    replaced = {source.key for source, _, _, _ in changed} | set(removed)
    missing = [] if rebuild or embedding is None else [
        row for row in store.chunks_without_embedding() if row[1] not in replaced]
    return SyncPlan(chunking, stored_embedding, rebuild, len(keys), changed, touched, removed,
                skipped, missing)


def unchanged(target: Target) -> bool:
    """Whether the index holds every source file as it is now, judged by size and time
    alone (nothing is read): for ``status`` in a process that has not synced yet."""
    known = target.store.files()
    sources = target.sources.sources(target.settings, {})
    skipped = skipped_files(target.store)
    seen = set()
    for source in sources:
        if source.key in skipped:
            seen.add(source.key)
            continue
        try:
            stat = source.stat()
        except OSError:
            return False
        if not _same_stat(known.get(source.key), stat):
            return False
        seen.add(source.key)
    return set(known) <= seen


def _same_stat(previous: Any, stat: Any) -> bool:
    """Whether an indexed file (its ``files`` row) has the size and time it has now."""
    return bool(previous) and previous[2] == stat.st_mtime and previous[3] == stat.st_size


def skipped_files(store: Any) -> dict[str, tuple[str, str]]:
    """The files the last sync skipped: key -> (reason, stamp)."""
    try:
        stored = json.loads(store.get_meta(SKIPPED_META) or "{}")
    except ValueError:
        return {}
    return {key: (str(item.get("reason", "")), str(item.get("stamp", "")))
            for key, item in stored.items() if isinstance(item, dict)}
