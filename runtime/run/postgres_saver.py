"""PostgreSQL checkpoints: LangGraph's `AsyncPostgresSaver`, reading a channel's history in small pages,
keeping the snapshots it read decoded, and writing a task's writes in one statement.

A turn starts by rebuilding the channels stored as writes (LangGraph `DeltaChannel`s: the history, the
globals, the turn's outputs; runtime/graph/state.py) from their nearest snapshot and the writes after it
(`aget_delta_channel_history`). LangGraph's saver walks back from the checkpoint a page of 1,024
checkpoints at a time: a session's first page is every checkpoint it keeps (up to 40 turns of steps with
retention, runtime/run/retention.py), though the snapshots are rarely more than 50 steps back. And it
fetches and decodes the snapshot at every turn: at 1,000 turns of the `linear` case, a turn spent 23 ms
there against 3.5 ms at turn 10 (`python -m bench.storage`). Here the same walk, with LangGraph's own
queries and helpers, reads pages of `FIRST_PAGE` checkpoints (doubling when a walk goes further), and a
snapshot already decoded is taken from `SnapshotCache` (runtime/run/snapshot_cache.py) instead of being
fetched again. A task's writes go in one statement (`aput_writes`). Everything else is LangGraph's saver.
"""
from __future__ import annotations

import asyncio
from typing import Any, Mapping, Sequence, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (WRITES_IDX_MAP, ChannelVersions, Checkpoint, CheckpointMetadata,
                                      DeltaChannelHistory, get_checkpoint_id)
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.postgres.base import _DELTA_PAGE_SIZE, _build_delta_stage1_sql
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from canvas2graph.runtime.run.retention import TABLE as COMPACTED
from canvas2graph.runtime.run.saver_common import CanvasSaverMixin

# LangGraph's stage 2, with the writes of a chain read checkpoint by checkpoint: its `checkpoint_id = ANY(...)`
# lets PostgreSQL scan every write of the thread instead (32 ms on a thread of 70,000 writes, for 32 ids)
WRITES_SQL = ("SELECT 'w'::text AS _kind, w.checkpoint_id, w.channel, w.type, w.blob, w.task_id, w.task_path, w.idx, "
              "NULL::text AS version FROM unnest(%s::text[]) AS ids(checkpoint_id) CROSS JOIN LATERAL "
              "(SELECT * FROM checkpoint_writes c WHERE c.thread_id = %s AND c.checkpoint_ns = %s "
              "AND c.checkpoint_id = ids.checkpoint_id AND c.channel = %s) w")
SEED_SQL = ("SELECT 'b'::text AS _kind, NULL::text AS checkpoint_id, channel, type, blob, NULL::text AS task_id, "
            "NULL::text AS task_path, NULL::int AS idx, version FROM checkpoint_blobs "
            "WHERE thread_id = %s AND checkpoint_ns = %s AND channel = %s AND version = %s")
# a task's writes in one statement, as arrays: LangGraph's saver sends one INSERT per write (a turn of
# begin -> LLM -> Message made 21 of its 100 statements so)
WRITES_INSERT_SQL = ("INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, "
                     "channel, type, blob) SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], "
                     "%s::text[], %s::int[], %s::text[], %s::text[], %s::bytea[]) "
                     "ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING")
FIRST_PAGE = 64              # checkpoints: the history's snapshots are at most 20 updates (about 50 steps) apart
CACHE_BYTES = 8_000_000      # bytes of snapshots as fetched (msgpack) the saver keeps decoded: up to ~40 MB in memory


class CanvasPostgresSaver(CanvasSaverMixin, AsyncPostgresSaver):
    """`AsyncPostgresSaver` with the delta-channel reads of the module doc."""

    CACHE_BYTES = CACHE_BYTES

    def __init__(self, conn: Any, *args: Any, **kwargs: Any):
        super().__init__(conn, *args, **kwargs)
        from psycopg_pool import AsyncConnectionPool
        if isinstance(conn, AsyncConnectionPool):
            # LangGraph's saver holds one lock around every query, pool or not (langgraph issue 7259): all the
            # turns a worker runs then read and wrote their checkpoints one at a time (`python -m bench.scale`,
            # 100 conversations on one worker: 10 to 20 s from a turn's start to its model call, the CPU idle).
            # Each query takes a connection of its own from the pool; at most half of them, so that the event
            # log, the job queue and the API keep theirs.
            self.lock = asyncio.Semaphore(max(1, conn.max_size // 2))

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                   new_versions: ChannelVersions) -> RunnableConfig:
        saved = await super().aput(config, checkpoint, metadata, new_versions)
        # a snapshot just written is what the next turn reads first: keep it decoded (every 20 updates, once)
        conf = config["configurable"]
        for ch, value in (checkpoint.get("channel_values") or {}).items():
            if isinstance(value, _DeltaSnapshot) and ch in new_versions:
                size = len(self.serde.dumps_typed(value)[1] or b"")
                self.cache.keep((str(conf["thread_id"]), conf.get("checkpoint_ns", ""), ch, str(new_versions[ch])),
                                value, size)
        return saved

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                          task_path: str = "") -> None:
        """LangGraph's, in one statement (`WRITES_INSERT_SQL`). Writes to LangGraph's special channels (an error,
        an interrupt), which replace what they find, go LangGraph's way."""
        if any(channel in WRITES_IDX_MAP for channel, _value in writes):
            await super().aput_writes(config, writes, task_id, task_path)
            return
        conf = config["configurable"]
        # serialised on a thread, as LangGraph does: a task's writes may be large (retrieved chunks, a document)
        rows = await asyncio.to_thread(self._dump_writes, conf["thread_id"], conf["checkpoint_ns"],
                                       conf["checkpoint_id"], task_id, task_path, writes)
        if not rows:
            return
        async with self._cursor() as cur:
            await cur.execute(WRITES_INSERT_SQL, [list(column) for column in zip(*rows)])

    async def _load_checkpoint_tuple(self, value: Any) -> Any:
        """LangGraph's, with the checkpoint's blobs decoded through the cache: listing a session (the trace,
        retention) reads the same history snapshot for every checkpoint until the next one."""
        versions = (value["checkpoint"].get("channel_versions") or {}) if value["channel_values"] else {}
        loaded = {}
        for key, type_, blob in value["channel_values"] or []:
            channel, kind = key.decode(), type_.decode()
            if kind != "empty":
                loaded[channel] = self.cache.load((value["thread_id"], value["checkpoint_ns"], channel,
                                                   str(versions.get(channel))), kind, blob, self.serde)
        found = await super()._load_checkpoint_tuple({**value, "channel_values": []})
        found.checkpoint["channel_values"].update(loaded)
        return found

    async def adelete_thread(self, thread_id: str) -> None:
        self.cache.forget(str(thread_id))
        await super().adelete_thread(thread_id)
        # and the traces of its compacted turns (runtime/run/retention.py), a table made on first compaction
        async with self._cursor() as cur:
            await cur.execute("SELECT to_regclass(%s) IS NOT NULL AS present", (COMPACTED,))
            if (await cur.fetchone())["present"]:
                await cur.execute(f"DELETE FROM {COMPACTED} WHERE thread_id = %s", (str(thread_id),))

    async def aget_delta_channel_history(self, *, config: RunnableConfig,
                                         channels: Sequence[str]) -> Mapping[str, DeltaChannelHistory]:
        """`AsyncPostgresSaver.aget_delta_channel_history` with smaller pages and cached seeds (module doc)."""
        if not channels:
            return {}
        channels = list(channels)
        thread_id = str(config["configurable"]["thread_id"])
        ns = config["configurable"].get("checkpoint_ns", "")
        checkpoint_id = get_checkpoint_id(config)
        if not checkpoint_id:
            target = await self.aget_tuple(config)
            if target is None:
                return {ch: {"writes": []} for ch in channels}
            checkpoint_id = target.config["configurable"]["checkpoint_id"]
        walk = await self._walk(thread_id, ns, checkpoint_id, channels)
        chain_by_ch, seed_ver_by_ch, seed_inline_by_ch = walk
        cached: dict[str, Any] = {}
        for ch in channels:
            if seed_ver_by_ch[ch] is not None:
                found, value = self.cache.get((thread_id, ns, ch, seed_ver_by_ch[ch]))
                if found:
                    cached[ch] = value
        with_chain = [ch for ch in channels if chain_by_ch[ch]]
        with_seed = [ch for ch in channels if seed_ver_by_ch[ch] is not None and ch not in cached]
        rows: list = []
        sql = " UNION ALL ".join([WRITES_SQL] * len(with_chain) + [SEED_SQL] * len(with_seed))
        if sql:
            params: list[Any] = []
            for ch in with_chain:
                params.extend([chain_by_ch[ch], thread_id, ns, ch])
            for ch in with_seed:
                params.extend([thread_id, ns, ch, seed_ver_by_ch[ch]])
            async with self._cursor() as cur:
                await cur.execute(sql, params)
                rows = await cur.fetchall()
        result = self._build_delta_channels_writes_history(
            channels=channels, chain_by_ch=chain_by_ch, seed_ver_by_ch=seed_ver_by_ch,
            seed_inline_by_ch=seed_inline_by_ch, stage2_rows=cast(Any, rows))
        for row in rows:                     # the seeds just fetched, for the next turn
            if row["_kind"] == "b" and "seed" in result.get(row["channel"], {}):
                self.cache.keep((thread_id, ns, row["channel"], row["version"]), result[row["channel"]]["seed"],
                                len(row["blob"] or b""))
        for ch, value in cached.items():
            result[ch]["seed"] = value
        return result

    async def _walk(self, thread_id: str, ns: str, checkpoint_id: str, channels: list[str]):
        """LangGraph's stage 1 (the walk back to each channel's seed) in pages of `FIRST_PAGE`, doubling."""
        parent_of: dict[str, str | None] = {}
        ver_by_i_by_cid: list[dict[str, str | None]] = [{} for _ in channels]
        hb_by_i_by_cid: list[dict[str, bool]] = [{} for _ in channels]
        inline_by_i_by_cid: list[dict[str, Any]] = [{} for _ in channels]
        chain_by_ch: dict[str, list[str]] = {ch: [] for ch in channels}
        seed_ver_by_ch: dict[str, str | None] = {ch: None for ch in channels}
        seed_inline_by_ch: dict[str, Any] = {}
        walk_cursor_by_ch: dict[str, str | None] = {}
        seeded: set[str] = set()
        cursor, size = checkpoint_id, FIRST_PAGE
        sql = _build_delta_stage1_sql(channels, paged=True, include_cursor=True)
        async with self._cursor() as cur:
            while True:
                params: list[Any] = [name for ch in channels for name in (ch, ch, ch, ch)]
                await cur.execute(sql, [*params, thread_id, ns, cursor, size])
                page = await cur.fetchall()
                if not page:
                    break
                oldest = self._ingest_stage1_page(page, channels, parent_of, ver_by_i_by_cid, hb_by_i_by_cid,
                                                  inline_by_i_by_cid)
                self._try_advance_walks(checkpoint_id, channels, parent_of, ver_by_i_by_cid, hb_by_i_by_cid,
                                        inline_by_i_by_cid, chain_by_ch, seed_ver_by_ch, seed_inline_by_ch,
                                        walk_cursor_by_ch, seeded)
                if len(seeded) == len(channels) or len(page) < size:
                    break
                cursor, size = oldest, min(2 * size, _DELTA_PAGE_SIZE)
                sql = _build_delta_stage1_sql(channels, paged=True)
        return chain_by_ch, seed_ver_by_ch, seed_inline_by_ch
