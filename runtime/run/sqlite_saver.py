"""SQLite session files: LangGraph's own `SqliteSaver`, driven from the event loop without a thread.

Why not LangGraph's `AsyncSqliteSaver`: it runs every SQL statement through aiosqlite, which hands
each call (cursor, execute, commit, close) to a worker thread and wakes the event loop when it is
done. A checkpointed step makes about ten such calls (one `aput`, one `aput_writes`), and those
thread hand-offs, not SQLite, are most of what a durable step costs: measured on the 50-LLM chain,
0.85 ms of CPU per step against 0.2 ms for the same SQL run in place (`docs/performance.md`,
"Durable sessions"). A local SQLite write with WAL and `synchronous=NORMAL` takes tens of
microseconds, less than one hand-off, so this saver runs LangGraph's synchronous `SqliteSaver`
methods directly inside its async ones.

The SQL, the schema, the serializer and the checkpoint format are LangGraph's, except that channel
values are kept in a blob table, one row per channel version, as `PostgresSaver` keeps them
(runtime/run/sqlite_blobs.py): a file written by `SqliteSaver` (or an earlier canvas2graph) is read by this
saver, but not the other way round.

What running in place means: while a statement runs the event loop waits for it. Writes are a few
tens of microseconds; a read of a long session's history is milliseconds. When another process
holds the file's write lock (a second server, `canvas2graph tokens`), SQLite's busy handler waits
for it, and the loop with it; PostgreSQL is the store for several servers (docs/architecture.md).
"""
from __future__ import annotations

import os
import sqlite3
from contextlib import closing, contextmanager
from typing import Any, AsyncIterator, Iterator, Sequence

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple

from canvas2graph.runtime.run.sqlite_blobs import ChannelBlobSqliteSaver, CompressingSerializer

BUSY_TIMEOUT_MS = 30_000


class InlineSqliteSaver(ChannelBlobSqliteSaver):
    """`SqliteSaver` (storing channel values per version, runtime/run/sqlite_blobs.py) whose async methods run
    the synchronous ones in place (see the module doc)."""

    @classmethod
    @contextmanager
    def open(cls, path: str) -> Iterator["InlineSqliteSaver"]:
        # check_same_thread=False: LangGraph's sync calls (`graph.invoke` from a worker thread, the
        # bridge's sync twins) reach the same connection; `SqliteSaver.lock` serializes them
        with closing(sqlite3.connect(path, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)) as conn:
            # a new file gives freed pages back as sessions are deleted (runtime/run/lifecycle.py); on a file
            # that has tables already this does nothing until a VACUUM (`canvas2graph sessions prune --vacuum`)
            conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
            saver = cls(conn, serde=CompressingSerializer())
            saver.setup()               # creates the tables and turns on WAL, before the pragma below
            conn.execute(f"PRAGMA synchronous={sqlite_synchronous()}")
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            yield saver

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.get_tuple(config)

    async def alist(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
                    before: RunnableConfig | None = None, limit: int | None = None) -> AsyncIterator[CheckpointTuple]:
        # `SqliteSaver.list` holds its lock while its generator is open; the consumer of `alist` may
        # await between items (and another task then write), so the rows are read first, in one go
        for item in list(self.list(config, filter=filter, before=before, limit=limit)):
            yield item

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                   new_versions: ChannelVersions) -> RunnableConfig:
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                          task_path: str = "") -> None:
        self.put_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        self.delete_thread(thread_id)

    async def aget_delta_channel_history(self, *args: Any, **kwargs: Any) -> Any:
        return self.get_delta_channel_history(*args, **kwargs)


def sqlite_synchronous() -> str:
    """SQLite's `synchronous` setting for session files: NORMAL unless CANVAS2GRAPH_SQLITE_SYNC says
    FULL or EXTRA.

    The saver commits at every step. With WAL, NORMAL skips the fsync of each commit (about 0.5 ms
    per step): a process crash loses nothing, an OS crash or power loss may lose the last commits
    but never corrupts the file. FULL also survives those, at that cost.
    """
    value = os.environ.get("CANVAS2GRAPH_SQLITE_SYNC", "").strip().upper()
    return value if value in ("NORMAL", "FULL", "EXTRA") else "NORMAL"
