"""Layer 2: the workspace on disk: its files (bootstrap files, MEMORY.md, daily logs, the
context files read from them), the backups kept before a tool changes one, and what
``clawd init`` lays down."""
