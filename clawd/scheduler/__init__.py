"""Automation's moving part (docs/automation.md): runs due jobs as ordinary turns and delivers them.

``runner`` claims what is due from the job store (``storage.jobs``), runs each claimed
occurrence as a turn of the loop (``Session.run_turn``, with the run's provenance) and
records it; ``delivery`` sends a finished run to its target as an outbox does, apart from
the run; ``heartbeat`` is the main session's periodic turn. The front ends drive them:
``clawd jobs tick`` once, ``clawd serve`` in the background.
"""
