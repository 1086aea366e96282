"""Retention: every step of a session's last turns, and for older turns only their trace.

Every step of every turn is a LangGraph checkpoint (that is what resuming, the trace and forks read), and each
costs about 1.5 KB of channel versions and bookkeeping however little it changed. `compact` keeps every step
of the last `keep` turns (`CANVAS2GRAPH_KEEP_TURNS`, default `KEEP_TURNS`; 0 keeps everything) and replaces
the older ones with their trace:

- the traces of the older turns (what `runtime.run.steps.atrace` shows: inputs, outputs, elapsed, errors, prompts,
  usage, tool calls) are stored, zlib-compressed JSON, in `c2g_compacted_turns`, one row per turn;
- the checkpoint the kept turns start from (the last one of the newest compacted turn) becomes the thread's
  first: its history and globals, LangGraph `DeltaChannel`s (runtime/graph/state.py), are stored there as a
  snapshot (`_DeltaSnapshot`, the blob LangGraph itself writes every `SNAPSHOT_EVERY` updates), so the values
  are rebuilt from it without the writes before it;
- the checkpoints before it, their writes and the channel values only they used are deleted, with the
  branches that forks left in those turns.

The Runner compacts after a turn that finished once the thread holds `2 * keep` turns of steps, so the work
is done once every `keep` turns and what a session stores grows with its content: the traces, the snapshot
(the conversation once, compressed) and the steps of at most `2 * keep` turns. A fork from a compacted step
is refused with an error saying so (`ForkError`); `runtime.run.steps.atrace` lists the compacted turns first.

Savers: canvas2graph's SQLite saver (runtime/run/sqlite_blobs.py) and LangGraph's `AsyncPostgresSaver`; other
checkpointers (in memory, say) are left as they are. Subgraph namespaces (a parallel Iteration's durable
items) are not compacted.
"""
from __future__ import annotations

import json
import logging
import os
import zlib
from typing import Any

from canvas2graph.runtime.graph.state import GLOBALS, HISTORY, LAST, LOOPS, OUTPUTS

log = logging.getLogger(__name__)

KEEP_TURNS = 20
TABLE = "c2g_compacted_turns"
DELTA_CHANNELS = (HISTORY, GLOBALS, OUTPUTS, LOOPS, LAST)     # runtime/graph/state.py: stored as writes and snapshots


def keep_turns() -> int:
    """`CANVAS2GRAPH_KEEP_TURNS` (a whole number >= 0; 0 keeps every step), else `KEEP_TURNS`."""
    raw = os.environ.get("CANVAS2GRAPH_KEEP_TURNS", "").strip()
    if not raw:
        return KEEP_TURNS
    if not raw.isdigit():
        raise ValueError(f"CANVAS2GRAPH_KEEP_TURNS: expected a whole number of turns (0 keeps every step), got {raw!r}")
    return int(raw)


def without_conversation(graph):
    """`graph` reading checkpoints without rebuilding the channels stored as writes (`DELTA_CHANNELS`: they read
    as empty): what the trace needs, which takes each step's outputs from its task's writes. Rebuilding them
    replays their writes back to a snapshot for every checkpoint read, which made listing a thread's steps cost
    its length times the distance between snapshots."""
    from langgraph.channels import LastValue
    channels = dict(graph.channels)
    for name in DELTA_CHANNELS:
        if name in channels:
            channels[name] = LastValue(object, name)
    return graph.copy(update={"channels": channels})


def _kind(saver) -> str | None:
    from canvas2graph.runtime.run.sqlite_blobs import ChannelBlobSqliteSaver
    if isinstance(saver, ChannelBlobSqliteSaver):
        return "sqlite"
    if any(cls.__name__ == "AsyncPostgresSaver" for cls in type(saver).__mro__):
        return "postgres"
    return None


def _pack(turn: dict) -> bytes:
    return zlib.compress(json.dumps(turn, ensure_ascii=False, default=str).encode(), 6)


def _unpack(blob: bytes) -> dict:
    return json.loads(zlib.decompress(bytes(blob)).decode())


# --- reading ------------------------------------------------------------------------------------
async def compacted_turns(saver, thread_id: str) -> list[dict]:
    """The stored traces of a thread's compacted turns, oldest first ([] for a saver that does not compact)."""
    kind = _kind(saver)
    if kind == "sqlite":
        with saver.lock:
            if not _sqlite_has_table(saver):
                return []
            rows = saver.conn.execute(f"SELECT trace FROM {TABLE} WHERE thread_id = ? ORDER BY turn",
                                      (str(thread_id),)).fetchall()
        return [_unpack(r[0]) for r in rows]
    if kind == "postgres":
        async with saver._cursor() as cur:
            await cur.execute("SELECT to_regclass(%s) AS t", (TABLE,))
            if (await cur.fetchone())["t"] is None:
                return []
            await cur.execute(f"SELECT trace FROM {TABLE} WHERE thread_id = %s ORDER BY turn", (str(thread_id),))
            return [_unpack(r["trace"]) for r in await cur.fetchall()]
    return []


async def _compacted_count(saver, kind: str, thread_id: str) -> int:
    """How many of the thread's turns are compacted already."""
    if kind == "sqlite":
        with saver.lock:
            if not _sqlite_has_table(saver):
                return 0
            return int(saver.conn.execute(f"SELECT COUNT(*) FROM {TABLE} WHERE thread_id = ?", (str(thread_id),)).fetchone()[0])
    async with saver._cursor() as cur:
        await cur.execute("SELECT to_regclass(%s) AS t", (TABLE,))
        if (await cur.fetchone())["t"] is None:
            return 0
        await cur.execute(f"SELECT COUNT(*) AS n FROM {TABLE} WHERE thread_id = %s", (str(thread_id),))
        return int((await cur.fetchone())["n"])


def _sqlite_has_table(saver) -> bool:
    return saver.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (TABLE,)).fetchone() is not None


# --- compacting ---------------------------------------------------------------------------------
async def compact(graph, thread_id: str, keep: int | None = None, *, every: int | None = None) -> int:
    """Compact the thread's turns older than the last `keep` once it holds `keep + every` turns of steps
    (`every` defaults to `keep`); returns how many turns were compacted (module doc)."""
    from canvas2graph.compiler.canvas import canvas_of
    from canvas2graph.runtime.run.steps import _build, _thread_config
    saver = graph.checkpointer
    kind = _kind(saver)
    keep = keep_turns() if keep is None else keep
    if kind is None or keep <= 0:
        return 0
    every = keep if every is None else every
    config = _thread_config({"configurable": {"thread_id": thread_id}})
    if await _turns_started(saver, kind, thread_id) < keep + every:       # cheap: no checkpoint is read
        return 0
    history = [s async for s in without_conversation(graph).aget_state_history(config)]          # newest first
    if not history:
        return 0
    by_id = {s.config["configurable"]["checkpoint_id"]: s for s in history}
    chain, head = [], history[0]
    while head is not None:
        chain.append(head)
        parent = head.parent_config
        head = by_id.get(parent["configurable"].get("checkpoint_id")) if parent else None
    chain.reverse()
    starts = [i for i, s in enumerate(chain) if (s.metadata or {}).get("source") == "input"]   # where turns start
    if len(starts) < keep + every or starts[-keep] == 0:
        return 0
    cut = starts[-keep]                      # the first checkpoint of the oldest kept turn
    root = chain[cut - 1]                    # the last of the newest compacted turn: the thread's new first
    turns = _build(canvas_of(graph), chain[:cut], history)
    earlier = await _compacted_count(saver, kind, thread_id)      # (their traces are not read: only counted)
    for i, turn in enumerate(turns):
        turn["turn"] = earlier + i + 1
        turn.pop("fork_of", None)
        turn["compacted"] = True
    root_id = root.config["configurable"]["checkpoint_id"]
    kept = _descendants(history, root_id)
    drop = [cid for cid in by_id if cid not in kept]
    saved = await saver.aget_tuple(root.config)
    versions = saved.checkpoint.get("channel_versions") or {}
    values = (await graph.aget_state(root.config)).values         # the conversation at the new first step
    snapshots = {ch: values[ch] for ch in DELTA_CHANNELS if ch in versions and ch in values}
    start = earlier + 1
    if kind == "sqlite":
        _compact_sqlite(saver, thread_id, root_id, drop, versions, snapshots, turns, start)
    else:
        await _compact_postgres(saver, thread_id, root_id, drop, versions, snapshots, turns, start)
    return len(turns)


async def _turns_started(saver, kind: str, thread_id: str) -> int:
    """How many runs started on the thread (checkpoints of source "input", on every branch)."""
    if kind == "sqlite":
        with saver.lock:
            row = saver.conn.execute("SELECT COUNT(*) FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' AND "
                                     "json_extract(CAST(metadata AS TEXT), '$.source') = 'input'", (str(thread_id),)).fetchone()
        return int(row[0])
    async with saver._cursor() as cur:
        await cur.execute("SELECT COUNT(*) AS n FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = '' AND "
                          "metadata ->> 'source' = 'input'", (str(thread_id),))
        return int((await cur.fetchone())["n"])


def _descendants(history: list, root_id: str) -> set[str]:
    children: dict[str, list[str]] = {}
    for s in history:
        parent = (s.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        if parent:
            children.setdefault(parent, []).append(s.config["configurable"]["checkpoint_id"])
    out, todo = set(), [root_id]
    while todo:
        cid = todo.pop()
        if cid not in out:
            out.add(cid)
            todo.extend(children.get(cid, []))
    return out


def _snapshot_blob(serde, value: Any) -> tuple[str, bytes]:
    from langgraph.checkpoint.serde.types import _DeltaSnapshot
    return serde.dumps_typed(_DeltaSnapshot(value))


def _compact_sqlite(saver, thread_id, root_id, drop, versions, snapshots, turns, start) -> None:
    from canvas2graph.runtime.run.sqlite_blobs import BLOBS_TABLE
    thread = str(thread_id)
    with saver.lock:
        conn = saver.conn
        try:
            conn.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (thread_id TEXT NOT NULL, turn INTEGER NOT NULL, "
                         "trace BLOB NOT NULL, PRIMARY KEY (thread_id, turn))")
            conn.executemany(f"INSERT OR REPLACE INTO {TABLE} (thread_id, turn, trace) VALUES (?, ?, ?)",
                             [(thread, start + i, _pack(t)) for i, t in enumerate(turns)])
            for ch, value in snapshots.items():
                type_, blob = _snapshot_blob(saver.serde, value)
                conn.execute(f"INSERT OR REPLACE INTO {BLOBS_TABLE} (thread_id, checkpoint_ns, channel, version, type, "
                             "blob) VALUES (?, '', ?, ?, ?, ?)", (thread, ch, str(versions[ch]), type_, blob))
            for i in range(0, len(drop), 500):
                part = drop[i:i + 500]
                marks = ", ".join("?" * len(part))
                for table in ("writes", "checkpoints"):
                    conn.execute(f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id "
                                 f"IN ({marks})", (thread, *part))
            conn.execute("UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE thread_id = ? AND checkpoint_ns = '' "
                         "AND checkpoint_id = ?", (thread, root_id))
            # the channel values no checkpoint left names any more
            used: set[tuple[str, str]] = set()
            for type_, blob in conn.execute("SELECT type, checkpoint FROM checkpoints WHERE thread_id = ? AND "
                                            "checkpoint_ns = ''", (thread,)):
                stored = saver.serde.loads_typed((type_, blob))
                used.update((ch, str(v)) for ch, v in (stored.get("channel_versions") or {}).items())
            stale = [(ch, v) for ch, v in conn.execute(f"SELECT channel, version FROM {BLOBS_TABLE} WHERE thread_id = ? "
                                                       "AND checkpoint_ns = ''", (thread,)) if (ch, v) not in used]
            conn.executemany(f"DELETE FROM {BLOBS_TABLE} WHERE thread_id = ? AND checkpoint_ns = '' AND channel = ? "
                             "AND version = ?", [(thread, ch, v) for ch, v in stale])
            conn.commit()
        except BaseException:
            conn.rollback()
            raise


async def _compact_postgres(saver, thread_id, root_id, drop, versions, snapshots, turns, start) -> None:
    thread = str(thread_id)
    async with saver._cursor(pipeline=False) as cur:
        async with cur.connection.transaction():
            await cur.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (thread_id TEXT NOT NULL, turn INTEGER NOT NULL, "
                              "trace BYTEA NOT NULL, PRIMARY KEY (thread_id, turn))")
            for i, t in enumerate(turns):
                await cur.execute(f"INSERT INTO {TABLE} (thread_id, turn, trace) VALUES (%s, %s, %s) ON CONFLICT "
                                  "(thread_id, turn) DO UPDATE SET trace = EXCLUDED.trace", (thread, start + i, _pack(t)))
            for ch, value in snapshots.items():
                type_, blob = _snapshot_blob(saver.serde, value)
                await cur.execute("INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) "
                                  "VALUES (%s, '', %s, %s, %s, %s) ON CONFLICT (thread_id, checkpoint_ns, channel, version) "
                                  "DO UPDATE SET type = EXCLUDED.type, blob = EXCLUDED.blob",
                                  (thread, ch, str(versions[ch]), type_, blob))
            if drop:
                await cur.execute("DELETE FROM checkpoint_writes WHERE thread_id = %s AND checkpoint_ns = '' AND "
                                  "checkpoint_id = ANY(%s)", (thread, drop))
                await cur.execute("DELETE FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = '' AND "
                                  "checkpoint_id = ANY(%s)", (thread, drop))
            await cur.execute("UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE thread_id = %s AND "
                              "checkpoint_ns = '' AND checkpoint_id = %s", (thread, root_id))
            await cur.execute("DELETE FROM checkpoint_blobs b WHERE b.thread_id = %s AND b.checkpoint_ns = '' AND NOT EXISTS "
                              "(SELECT 1 FROM checkpoints c WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = '' "
                              "AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)", (thread,))
