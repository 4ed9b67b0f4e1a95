"""Automation's pure core (docs/automation.md): when a job runs, never how.

``zones`` finds the user's time zone, ``when`` reads a time (``--at``: ISO 8601 or a phrase
such as "in 20 minutes" or "Friday 18:30") and a duration (``--every``), ``schedule`` gives
the next occurrences of a job's schedule (``at``, ``every``, ``cron`` in a zone) and which
of them are due, ``jobs`` holds the shapes of a job and a run, ``heartbeat`` decides whether
a heartbeat turn is worth a model call. Nothing here reads a clock or a file: the time is
always handed in.
"""
