"""Layer 3: what goes into a request and how it is kept within the window: the four
layers, the token meter, pruning and its ledger, compaction, the memory-flush policy, and
who may see and write what (access). Pure policies where it can be."""
