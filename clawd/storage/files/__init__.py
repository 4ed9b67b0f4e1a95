"""The embedded storage: files under ``~/.clawd`` and the workspace folder.

``storage.FileStorage`` is one agent's ``AgentStorage``: ``sessions.SessionStore``
(``sessions.json``), ``transcripts.Transcript`` (a JSONL file per session),
``workspace.DiskFiles`` and ``backups.DiskBackups`` (the workspace and its kept versions) and
``memory.DiskSources`` (what the memory index reads). The state folder's small JSON
documents (``jsondoc``) are the jobs, channels, people and lockouts of the embedded
gateway; ``locking`` is the file lock their writers share. ``storage.postgres`` is the other
implementation of the same interfaces.
"""
