"""Layer 4: the turn loop. A session conducts a turn: recall, upkeep (flush, compaction),
model calls, tool runs, as a stream of events. No printing, no terminal: the front ends
render what it yields, and an async server can drive it."""
