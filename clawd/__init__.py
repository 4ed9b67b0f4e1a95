"""clawd: an agent runtime and chat assistant whose memory is plain Markdown on disk."""

__version__ = "0.1.0"
