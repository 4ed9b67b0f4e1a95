"""Layer 2: where conversations are kept: the session store (``sessions.json``) and its
typed entry, the append-only JSONL transcripts, reading them back, and the one-writer lock."""
