"""Cutting chunks into the parts a small embedding model embeds one by one.

A chunk is about 400 tokens: a day's log with a kitchen section and a car section, or three
paragraphs on three matters. Small models read 256 tokens and average what they read, so one
vector of such a chunk matches none of its topics well. Each chunk is therefore embedded as
parts, and search scores it by the best of its parts and the whole (``candidates.py``).

The rule (``segment_chunks``):

- **Sections.** A heading inside the chunk starts a new part; its text is the heading path
  (``2026-03-02 > Car``) and then the section's lines. Lines before the chunk's first
  heading are under the path in force where the chunk starts.
- **Blocks.** Within a section, lines separated by a blank line are separate parts, and so
  is a list (``-``, ``*``, ``+``, ``1.`` items and their indented lines) from the prose
  just before or after it. Lines inside a code fence never split it.
- **Not too small.** A block of fewer than ``MIN_PART_TOKENS`` model tokens (a one-word
  line, a list's lead-in) joins the next block of its section, else the previous one; a
  section that small joins the part before it (its heading becomes a line there), else the
  one after it.
- **Not too large.** A block longer than ``max_tokens`` is packed line by line into pieces
  of at most ``max_tokens`` (a line longer than that is cut at whitespace).
- **Not too many.** A chunk that would have more than ``MAX_PARTS`` parts is packed as a
  transcript is: its lines in order into pieces of ``max_tokens`` under the chunk's heading,
  whatever the sections. A chunk without blank lines or inner headings (a transcript) is
  packed that way anyway.
- **List items.** Each item of a list (its line and the indented lines under it) is also a
  part of its own, without a heading path, whatever the packing above: a day's "## Work"
  list of a security audit and an offsite venue, or MEMORY.md's bullets, holds unrelated
  facts side by side, and a paraphrase of one item scored under ``minScore`` against the
  list as a whole. An item under ``MIN_PART_TOKENS`` has no part of its own.

Every distinct line and heading path is tokenized once, in one call, and a part's ids are
those of its heading path and lines in order: for a tokenizer to which whitespace is only a
separator (WordPiece, as in the MiniLM family) exactly the tokens of its text, so the model
never tokenizes it again. Pure functions; the tokenizer comes from a callable.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from clawd.core import listmark
from clawd.memory.chunker import FENCE_RE, HEADING_RE, Chunk, Tokenize, TokenizedText

# False packs every chunk's lines under its heading, whatever its sections (the rule before
# section parts); benchmarks switch it to compare.
SECTION_PARTS = True
MIN_PART_TOKENS = 8
MAX_PARTS = 8
# False leaves list items without vectors of their own (the rule before item parts).
ITEM_PARTS = True


@dataclass(frozen=True, slots=True)
class Segment:
    """A part of a chunk to embed on its own: its text and that text's token ids."""

    text: str
    ids: list[int]


@dataclass(slots=True)
class _Block:
    prefix: str  # the heading path the block is embedded under
    section: int  # which section of the chunk (0: before its first heading)
    title: str  # that section's heading ("" for section 0)
    lines: list[str] = field(default_factory=list)
    listed: bool = False  # a list block


def segment_chunks(chunks: list[Chunk], max_tokens: int,
                   tokenize: Tokenize) -> list[list[Segment]]:
    """Each chunk cut into its parts (the rule above), with their token ids."""
    blocked = [_blocks(chunk) for chunk in chunks]
    wanted: set[str] = set()
    for chunk, found in zip(chunks, blocked):
        wanted.update(line for block in found for line in block.lines)
        wanted.update(text for block in found for text in (block.prefix, block.title))
        wanted.add(chunk.heading if found else chunk.context_text())
    wanted.discard("")
    order = sorted(wanted)
    tokens = dict(zip(order, tokenize(order)))
    return [_parts(chunk, found, max_tokens, tokens) for chunk, found in zip(chunks, blocked)]


def _blocks(chunk: Chunk) -> list[_Block]:
    """The chunk's body lines in blocks (sections, blank-line groups, lists); heading lines
    are in no block. With ``SECTION_PARTS`` off, one block of every body line."""
    if not SECTION_PARTS:
        lines = [line for line in chunk.text.split("\n")
                 if line.strip() and not HEADING_RE.match(line)]
        return [_Block(chunk.heading, 0, "", lines)] if lines else []
    titles = chunk.heading.split(" > ") if chunk.heading else []
    levels = chunk.levels if len(chunk.levels) == len(titles) else range(1, len(titles) + 1)
    path = list(zip(levels, titles))
    blocks: list[_Block] = []
    current = _Block(chunk.heading, 0, "")
    in_fence = False
    for line in chunk.text.split("\n"):
        if FENCE_RE.match(line):
            in_fence = not in_fence
        elif not in_fence:
            heading = HEADING_RE.match(line)
            if heading or not line.strip():
                if current.lines:
                    blocks.append(current)
                if heading:
                    level, title = len(heading.group(1)), heading.group(2)
                    path = [(lvl, t) for lvl, t in path if lvl < level] + [(level, title)]
                    current = _Block(" > ".join(t for _, t in path), current.section + 1,
                                     title)
                else:
                    current = _Block(current.prefix, current.section, current.title)
                continue
            listed = bool(listmark.ITEM.match(line)) or (current.listed and line[:1].isspace())
            if current.lines and listed != current.listed:
                blocks.append(current)
                current = _Block(current.prefix, current.section, current.title)
            current.listed = listed
        if line.strip():
            current.lines.append(line)
    if current.lines:
        blocks.append(current)
    return blocks


def _size(block: _Block, tokens: dict[str, TokenizedText]) -> int:
    return sum(len(tokens[line].ids) for line in block.lines)


def _join_small(blocks: list[_Block], tokens: dict[str, TokenizedText]) -> list[_Block]:
    """Blocks under ``MIN_PART_TOKENS`` joined to a neighbour: within their section first
    (the next block, else the previous one), else the previous part, else the next."""
    kept: list[_Block] = []
    carried: list[str] = []  # small blocks waiting for the next block of their section
    for index, block in enumerate(blocks):
        block.lines = carried + block.lines
        carried = []
        following = blocks[index + 1] if index + 1 < len(blocks) else None
        if _size(block, tokens) >= MIN_PART_TOKENS:
            kept.append(block)
        elif following is not None and following.section == block.section:
            carried = block.lines
        elif kept and kept[-1].section == block.section:
            kept[-1].lines += block.lines
        else:
            kept.append(block)  # a small section alone: joined across sections below
    out: list[_Block] = []
    pending: list[str] = []  # a small first section waiting for the part after it
    for block in kept:
        heading = [block.title] if block.title else []
        if pending:
            block.lines = pending + block.lines
            pending = []
        if _size(block, tokens) >= MIN_PART_TOKENS or len(kept) == 1:
            out.append(block)
        elif out:
            out[-1].lines += heading + block.lines
        else:
            pending = heading + block.lines
    if pending:  # nothing after it: it stays a part of its own
        out.append(_Block(kept[-1].prefix, kept[-1].section, kept[-1].title, pending))
    return out


def _parts(chunk: Chunk, blocks: list[_Block], max_tokens: int,
           tokens: dict[str, TokenizedText]) -> list[Segment]:
    if not blocks:  # headings alone
        text = chunk.context_text()
        return [Segment(text, tokens[text].ids)]
    items = [item for block in blocks if block.listed and ITEM_PARTS
             for item in _items(block, max_tokens, tokens)]
    lines = [line for block in blocks for line in block.lines]
    parts = [part for block in _join_small(blocks, tokens)
             for part in _pack(block.prefix, block.lines, max_tokens, tokens)]
    if len(parts) > MAX_PARTS:
        parts = _pack(chunk.heading, lines, max_tokens, tokens)
    known = {part.text for part in parts}
    return parts + [item for item in items if item.text not in known]


def _items(block: _Block, max_tokens: int, tokens: dict[str, TokenizedText]) -> list[Segment]:
    """Each item of a list block (its line and the indented lines under it) as a part of
    its own, without a heading path; items under ``MIN_PART_TOKENS`` have none."""
    groups: list[list[str]] = []
    for line in block.lines:
        if not groups or listmark.ITEM.match(line) and not line[:1].isspace():
            groups.append([line])
        else:
            groups[-1].append(line)
    return [part for group in groups
            if sum(len(tokens[line].ids) for line in group) >= MIN_PART_TOKENS
            for part in _pack("", group, max_tokens, tokens)]


def _pack(prefix: str, lines: list[str], max_tokens: int,
          tokens: dict[str, TokenizedText]) -> list[Segment]:
    """``lines`` in order in pieces of at most ``max_tokens`` tokens, each under ``prefix``."""
    head = tokens[prefix].ids if prefix else []
    start = f"{prefix}\n" if prefix else ""
    budget = max(max_tokens - len(head), max_tokens // 2, 1)
    segments: list[Segment] = []
    texts: list[str] = []
    ids: list[int] = []
    for line in lines:
        for piece, piece_ids in split_tokens(line, tokens[line], budget):
            if texts and len(ids) + len(piece_ids) > budget:
                segments.append(Segment(start + "\n".join(texts), head + ids))
                texts, ids = [], []
            texts.append(piece)
            ids += piece_ids
    segments.append(Segment(start + "\n".join(texts), head + ids))
    return segments


def split_tokens(text: str, tokens: TokenizedText, max_tokens: int) -> list[tuple[str, list[int]]]:
    """One line cut into pieces of at most ``max_tokens`` tokens, at whitespace when there
    is some in the second half of a piece: (text, ids) of each."""
    ids, offsets = tokens.ids, tokens.offsets
    if len(ids) <= max_tokens:
        return [(text, ids)]
    pieces: list[tuple[str, list[int]]] = []
    start, begin = 0, 0  # first token and first character of the current piece
    while len(ids) - start > max_tokens:
        cut = start + max_tokens
        # Back off to the last token that follows whitespace, if that keeps half a piece.
        for candidate in range(cut, start + max_tokens // 2, -1):
            if offsets[candidate][0] > offsets[candidate - 1][1]:
                cut = candidate
                break
        end = offsets[cut][0]
        pieces.append((text[begin:end], ids[start:cut]))
        start, begin = cut, end
    pieces.append((text[begin:], ids[start:]))
    return pieces
