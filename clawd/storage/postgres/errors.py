"""Which database errors mean "the server does not answer" (an outage: a 503 to retry),
as against a statement the server refused."""

from __future__ import annotations


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the server did not answer (no connection to be had, or the one
    in use lost), not that it refused a statement (those carry an SQLSTATE)."""
    from psycopg import OperationalError
    from psycopg_pool import PoolTimeout

    return isinstance(exc, PoolTimeout) or (isinstance(exc, OperationalError)
                                            and exc.sqlstate is None)
