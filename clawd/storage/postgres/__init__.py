"""clawd's stores in one PostgreSQL database (with pgvector): sessions, transcripts, the
workspace files and their versions, records and session leases. ``database(url)`` opens
it; ``Database.agent(id)`` is one agent's ``AgentStorage``. psycopg 3 and psycopg_pool are
imported here, never by the embedded default.
"""

from clawd.storage.postgres.database import Database, DatabaseError, database

__all__ = ["Database", "DatabaseError", "database"]
