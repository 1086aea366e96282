"""The runner: a compiled graph driven turn by turn with LangGraph's own calls.

`runner.Runner` runs a turn (a paused form resumes with its answer), `events` turns LangGraph's stream
into RAGFlow's events, `steps` reads a session's step history and forks it, `checkpoint` opens the
checkpointer (`sqlite_saver`, `sqlite_blobs`: SQLite storing changed values only; PostgreSQL),
`lifecycle` prunes idle sessions, and `ingest/` runs ingestion pipelines into a retrieval store.
"""
