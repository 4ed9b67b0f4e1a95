"""The tuning numbers of the weak-model guards (and recall's), as data a profile holds.

Each guard of the ``weak`` profile (``guards.profile``) judges a reply, a note or a summary
by shares of words and lengths; those numbers were measured with the guard
(``scripts/bench_guards.py``, ``scripts/bench_turn_guards.py``, figures in
docs/real-models.md) and are the defaults here. A profile holds one ``Thresholds``
(``Profile.thresholds``) and each guard is built from it; the pure functions a guard runs
(``context.replytext``, ``guards.founded``, ``guards.junk_notes``, ``guards.loops``,
``guards.reading``, ``loop.recall``) take it as ``tuning``, these defaults when a caller
outside a profile (a test, a benchmark) gives none. The language they read by (words,
phrases) is in ``core.phrases``; the sizes that are no guard's (a summary's cap, a
snippet's length) stay named beside their code.

This sits below the guards so that the context functions a guard calls can take it too.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Thresholds:
    # looping (``guards.loops``): a reply is stopped once its end is one stretch of at
    # most ``loop_unit`` characters repeated ``loop_repeats`` times over ``loop_span``
    # characters, looked at every ``loop_check_every`` characters streamed
    loop_repeats: int = 10
    loop_span: int = 300
    loop_unit: int = 400
    loop_check_every: int = 40

    # echo (``context.replytext``): a message shorter than ``echo_words`` words (a
    # greeting) may well be answered in its own words; a reply at least ``echo_likeness``
    # alike to it (difflib's ratio) only repeats it; a reply of ``copy_words`` words or
    # more with ``copy_share`` of its runs of four words in the instructions copies them
    echo_words: int = 6
    echo_likeness: float = 0.9
    copy_words: int = 10
    copy_share: float = 0.8

    # file_answer (``guards.reading``): an answer using a file it read holds this many of
    # the file's own words (not the message's)
    used_words: int = 2

    # founded_notes (``guards.founded``): a note line is founded when this share of its
    # other words (in any form) is in what was said; a note filling this many template
    # labels is a filled template
    founded_share: float = 0.5
    template_lines: int = 2

    # junk_notes (``guards.junk_notes``): the share of a line's words that must be new, and
    # of a note's lines that must be junk, advice or copies for the write to be refused;
    # a copy of ``junk_echo_share`` of the user's message is an echo; a note is drawn on
    # what the model was shown when ``junk_shown_share`` of its words are there; a line is
    # copied from a file when ``junk_copy_share`` of its runs of three words are in it
    junk_new_share: float = 0.5
    junk_echo_share: float = 0.8
    junk_shown_share: float = 0.5
    junk_copy_share: float = 0.8

    # automatic recall (``loop.recall.choose``), for every profile that recalls: hits
    # scoring more than ``recall_margin`` below the best one are left out, noise beside it
    # for a small model (None: none is, the search's own ranking stands, as under the
    # ``strong`` profile); a hit cut shorter than ``recall_min_piece`` characters to fit
    # the block is left out
    recall_margin: float | None = 0.15
    recall_min_piece: int = 80


DEFAULT = Thresholds()  # the measured numbers, for a caller outside a profile
