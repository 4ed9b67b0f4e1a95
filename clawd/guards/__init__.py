"""Layer 3: what a weak model needs to be kept from: blank or echoed answers, claims of
notes never written, replies caught in a loop, text copied from its own history. Each guard
is switched on by the model's profile."""
