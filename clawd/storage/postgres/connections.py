"""What the PostgreSQL stores need of their database: ``Connections``.

``database.Database`` is the one implementation (a pool of connections to a database whose
schema is current); the stores name this Protocol instead, so the package's modules import
one another in one direction only (``Database.agent`` builds a ``PgStorage``).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol


class Connections(Protocol):
    """A database the stores talk to."""

    url: str
    location: str  # the database as messages name it (no password)
    worker: str  # who this process is (``application_name`` of its connections)
    schema_version: int  # the migrations applied (0: no schema yet)
    vector_version: str | None  # pgvector's version, None where it is not installed

    def connection(self) -> AbstractContextManager[Any]:
        """A pooled connection in autocommit (``with db.connection() as conn``); a
        ``StoreUnavailable`` when the server does not answer."""
        ...

    def lease_connection(self) -> Any:
        """The connection this process's session leases are advisory locks on."""
        ...
