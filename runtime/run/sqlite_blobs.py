"""SQLite checkpoints that store a channel's value only when it changes, as `PostgresSaver` does.

LangGraph's `SqliteSaver` serializes the whole checkpoint, every channel's value included, at every
step. canvas2graph's state holds the conversation's history and the turn's outputs, so every step of a
turn stored them all again: a session grew with the square of its length (33 MB after 100 turns of the
`linear` parity case, `python -m bench.storage`). `PostgresSaver` instead keeps each channel's value in
a blob table keyed by (thread, namespace, channel, version) and writes a blob only for the channels a
step changed (`new_versions`); a checkpoint row then holds the versions, and reading it joins the
blobs back. `ChannelBlobSqliteSaver` does the same on SQLite, with LangGraph's `SqliteSaver` for
everything else (its tables, writes, serializer, locking and the checkpoint format itself).

A channel that has a version and no value at a checkpoint (a `DeltaChannel` between snapshots, the turn's
outputs at most steps) gets no blob row: a checkpoint row written by this saver carries `LAYOUT`, which says
every value it has is in the blob table, so a missing row reads as "no value". A checkpoint whose parent is
not of that layout (the first of a thread, or the first after an earlier canvas2graph) stores every
channel's value, not only the changed ones.

Rows of every kind live side by side, so a file written by an earlier canvas2graph keeps working with
no migration: a checkpoint row whose `channel_values` is filled (the oldest kind) is read as it is, and a
row of the kind before `LAYOUT` stored a marker row for each channel without a value. For a row without
`LAYOUT`, a blob missing for a channel's version (a fork from an old-kind checkpoint of a thread that has
blobs) is found in the nearest ancestor row that holds the value inline, and stored.

Values and checkpoint rows of `COMPRESS_FROM` bytes or more are stored zlib-compressed
(`CompressingSerializer`), as PostgreSQL compresses its blobs. A checkpoint row is mostly channel versions,
which compress three to four times; uncompressed, a row of about 2 KB took a 4 KB page of its own.
The tables are created WITHOUT ROWID (`_LANGGRAPH_SCHEMA`), so a row's key is not stored a second time in
an index.

Channels declared as LangGraph's `DeltaChannel` (runtime/graph/state.py: the history, the globals, the
turn's outputs and loops, the last component) store no value at most versions and, every so often, a
snapshot; their value is rebuilt from the
nearest snapshot and the writes after it. `SqliteSaver.get_delta_channel_history` looks for snapshots in
the checkpoint rows only; `get_delta_channel_history` here looks in the blob table too (and in the rows
of the old kind), with LangGraph's own queries and helpers for the walk and the writes.

Snapshots are read at the start of every turn of a conversation; the saver keeps the values of the largest
blob rows it read or wrote last decoded (runtime/run/snapshot_cache.py, `CACHE_BYTES` of stored bytes; decoded,
a value takes 5 to 20 times its compressed bytes, so at most about 40 MB).

Files written by this saver need it to be read: LangGraph's own `SqliteSaver` would see empty states.
"""
from __future__ import annotations

import zlib
from typing import Any, Iterator, Optional

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple,
                                      DeltaChannelHistory, get_checkpoint_id)
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite._delta import (DELTA_STAGE1_SQL, build_delta_channels_writes_history,
                                                build_delta_stage2_sql)

from canvas2graph.runtime.run.retention import TABLE as COMPACTED
from canvas2graph.runtime.run.saver_common import CanvasSaverMixin

COMPRESS_FROM = 512      # bytes: larger values and checkpoint rows are stored zlib-compressed
CACHE_BYTES = 2_000_000  # stored (compressed) bytes of values the saver keeps decoded: up to ~40 MB in memory
ZLIB = "+zlib"
BLOBS_TABLE = "checkpoint_blobs"
EMPTY = "empty"          # a channel that has a version and no value (as PostgresSaver marks it; rows before LAYOUT)
LAYOUT = "c2g_blob_layout"   # in a checkpoint row: all its values are blob rows, a missing row is no value
_SCHEMA = f"""CREATE TABLE IF NOT EXISTS {BLOBS_TABLE} (
    thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL DEFAULT '', channel TEXT NOT NULL,
    version TEXT NOT NULL, type TEXT NOT NULL, blob BLOB,
    PRIMARY KEY (thread_id, checkpoint_ns, channel, version)) WITHOUT ROWID"""
# `SqliteSaver`'s own tables, as it creates them but WITHOUT ROWID: the rows live in their primary key's
# b-tree, so the key (the session id, checkpoint and task ids: most of a small row) is stored once, not
# again in a separate index. Created before `SqliteSaver.setup`, whose CREATE TABLE IF NOT EXISTS then
# leaves them; files made earlier keep their tables as they are.
_LANGGRAPH_SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoints (
    thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL DEFAULT '', checkpoint_id TEXT NOT NULL,
    parent_checkpoint_id TEXT, type TEXT, checkpoint BLOB, metadata BLOB,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS writes (
    thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL DEFAULT '', checkpoint_id TEXT NOT NULL,
    task_id TEXT NOT NULL, task_path TEXT NOT NULL DEFAULT '', idx INTEGER NOT NULL, channel TEXT NOT NULL,
    type TEXT, value BLOB,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)) WITHOUT ROWID;
"""


class CompressingSerializer(JsonPlusSerializer):
    """LangGraph's serializer, with values of `COMPRESS_FROM` bytes or more zlib-compressed (type "msgpack+zlib").

    PostgreSQL compresses what it stores (TOAST); SQLite does not, and a conversation's history is text
    that compresses two to five times. Values stored uncompressed (by `SqliteSaver`, an earlier version)
    are read as they are."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        type_, data = super().dumps_typed(obj)
        if data is not None and len(data) >= COMPRESS_FROM:
            return type_ + ZLIB, zlib.compress(data, 1)
        return type_, data

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_, blob = data
        if type_.endswith(ZLIB):
            return super().loads_typed((type_[:-len(ZLIB)], zlib.decompress(blob)))
        return super().loads_typed(data)


class ChannelBlobSqliteSaver(CanvasSaverMixin, SqliteSaver):
    """`SqliteSaver` keeping channel values in a blob table, one row per channel version (module doc)."""

    CACHE_BYTES = CACHE_BYTES

    def setup(self) -> None:
        if self.is_setup:
            return
        if not self.conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'checkpoints'").fetchone():
            self.conn.executescript(_LANGGRAPH_SCHEMA)
        super().setup()             # (called under `self.lock` by `cursor()`: no lock taken here)
        self.conn.execute(_SCHEMA)
        self.conn.commit()

    # --- writing -------------------------------------------------------------------------------
    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        thread_id = str(config["configurable"]["thread_id"])
        ns = config["configurable"].get("checkpoint_ns", "")
        values = checkpoint.get("channel_values") or {}
        versions = checkpoint.get("channel_versions") or {}
        # after a checkpoint of this layout, only what changed; else every channel (module doc)
        parent = config["configurable"].get("checkpoint_id")
        changed = new_versions if parent and self._in_layout(thread_id, ns, parent) else versions
        rows = [(thread_id, ns, channel, str(version), *self.serde.dumps_typed(values[channel]))
                for channel, version in changed.items() if channel in values]
        with self.cursor() as cur:       # the blobs first: a checkpoint row never names a missing blob
            cur.executemany(f"INSERT OR IGNORE INTO {BLOBS_TABLE} (thread_id, checkpoint_ns, channel, version, "
                            "type, blob) VALUES (?, ?, ?, ?, ?, ?)", rows)
        for row in rows:                 # a snapshot just written is what the next turn reads first
            self.cache.keep(row[:4], values[row[2]], len(row[5] or b""))
        return super().put(config, {**checkpoint, "channel_values": {}, LAYOUT: 1}, metadata, new_versions)

    def _in_layout(self, thread_id: str, ns: str, checkpoint_id: str) -> bool:
        """Whether the checkpoint row was written in this saver's layout (`LAYOUT`)."""
        with self.cursor(transaction=False) as cur:
            cur.execute("SELECT type, checkpoint FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND "
                        "checkpoint_id = ?", (thread_id, ns, checkpoint_id))
            row = cur.fetchone()
        return row is not None and bool(self.serde.loads_typed((row[0], row[1])).get(LAYOUT))

    def delete_thread(self, thread_id: str) -> None:
        self.cache.forget(str(thread_id))
        super().delete_thread(thread_id)
        with self.cursor() as cur:
            cur.execute(f"DELETE FROM {BLOBS_TABLE} WHERE thread_id = ?", (str(thread_id),))
            # and the traces of its compacted turns (runtime/run/retention.py), a table made on first compaction
            if cur.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (COMPACTED,)).fetchone():
                cur.execute(f"DELETE FROM {COMPACTED} WHERE thread_id = ?", (str(thread_id),))

    # --- reading -------------------------------------------------------------------------------
    def get_delta_channel_history(self, *, config: RunnableConfig, channels: Any) -> dict[str, DeltaChannelHistory]:
        """`SqliteSaver.get_delta_channel_history` with seeds found in the blob table (module doc).

        The walk follows parent ids from the target (LangGraph's stage-1 query), nearest first; each
        ancestor's channel versions say which blob holds the channel's value there, and a blob that is no
        marker (a snapshot, or the value an old session had) ends that channel's walk. A version is looked
        up once, however many ancestors share it."""
        channels = list(channels)
        if not channels:
            return {}
        conf = config["configurable"]
        thread_id, ns = str(conf["thread_id"]), conf.get("checkpoint_ns", "")
        checkpoint_id = get_checkpoint_id(config)
        if not checkpoint_id:
            target = super(ChannelBlobSqliteSaver, self).get_tuple(config)
            if target is None:
                return {ch: {"writes": []} for ch in channels}
            checkpoint_id = target.config["configurable"]["checkpoint_id"]
        chain: dict[str, list[str]] = {ch: [] for ch in channels}
        seeds: dict[str, Any] = {}
        looked: dict[tuple[str, str], bool] = {}
        active, walked, started = set(channels), set(), False
        with self.cursor(transaction=False) as cur:
            lookup = self.conn.cursor()      # the walk's rows come lazily from `cur` (SQLite stops the recursion)
            for cid, type_, blob in cur.execute(DELTA_STAGE1_SQL, (thread_id, ns, checkpoint_id, thread_id, ns)):
                if not started:
                    started = cid == checkpoint_id       # the target's own writes and value are not part of it
                    walked.add(cid)
                    continue
                if not active or cid in walked:
                    break
                walked.add(cid)
                for ch in active:
                    chain[ch].append(cid)
                stored = self.serde.loads_typed((type_, blob))
                inline = stored.get("channel_values") or {}
                versions = stored.get("channel_versions") or {}
                for ch in list(active):
                    if ch in inline:
                        seeds[ch] = inline[ch]
                    elif ch in versions and (ch, str(versions[ch])) not in looked:
                        key = (ch, str(versions[ch]))
                        row = lookup.execute(f"SELECT type, blob FROM {BLOBS_TABLE} WHERE thread_id = ? AND checkpoint_ns = ? "
                                          "AND channel = ? AND version = ?", (thread_id, ns, ch, key[1])).fetchone()
                        looked[key] = row is not None and row[0] != EMPTY
                        if looked[key]:
                            seeds[ch] = self.cache.load((thread_id, ns, *key), row[0], row[1], self.serde)
                    if ch in seeds:
                        active.discard(ch)
            lookup.close()
            with_chain = [ch for ch in channels if chain[ch]]
            sql = build_delta_stage2_sql(has_task_path=self._has_task_path,
                                         chain_lens=[len(chain[ch]) for ch in with_chain])
            found = []
            if sql:
                params: list[Any] = []
                for ch in with_chain:
                    params.extend([thread_id, ns, ch, *chain[ch]])
                found = cur.execute(sql, params).fetchall()
        return build_delta_channels_writes_history(channels=channels, chain_by_ch=chain, seed_val_by_ch=seeds,
                                                   seeded=set(seeds), stage2_rows=found, serde=self.serde)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        found = super().get_tuple(config)
        return self._with_values(found) if found is not None else None

    def list(self, config: Optional[RunnableConfig], *, filter: dict[str, Any] | None = None,
             before: RunnableConfig | None = None, limit: int | None = None) -> Iterator[CheckpointTuple]:
        # read the rows first: `SqliteSaver.list` holds the lock while its generator is open, and the
        # values are read with it
        for found in list(super().list(config, filter=filter, before=before, limit=limit)):
            yield self._with_values(found)

    def _with_values(self, found: CheckpointTuple) -> CheckpointTuple:
        """The tuple with its channel values joined from the blobs (a row of the old kind has them)."""
        checkpoint = found.checkpoint
        layout = bool(checkpoint.get(LAYOUT))
        if LAYOUT in checkpoint:
            checkpoint = {k: v for k, v in checkpoint.items() if k != LAYOUT}
            found = found._replace(checkpoint=checkpoint)
        values = checkpoint.get("channel_values") or {}
        versions = checkpoint.get("channel_versions") or {}
        wanted = {ch: str(v) for ch, v in versions.items() if ch not in values}
        if not wanted:
            return found
        conf = found.config["configurable"]
        thread_id, ns = str(conf["thread_id"]), conf.get("checkpoint_ns", "")
        loaded = dict(values)
        missing = dict(wanted)
        with self.cursor(transaction=False) as cur:
            for channel, version in wanted.items():      # one primary-key lookup each (a row-value IN scans)
                cur.execute(f"SELECT type, blob FROM {BLOBS_TABLE} WHERE thread_id = ? AND checkpoint_ns = ? "
                            "AND channel = ? AND version = ?", (thread_id, ns, channel, version))
                row = cur.fetchone()
                if row is not None:
                    missing.pop(channel)
                    if row[0] != EMPTY:
                        loaded[channel] = self.cache.load((thread_id, ns, channel, version), row[0], row[1], self.serde)
        if missing and found.parent_config is not None and not layout:
            loaded.update(self._inline_in_ancestors(found.parent_config, missing))
        return found._replace(checkpoint={**checkpoint, "channel_values": loaded})

    def _inline_in_ancestors(self, parent: RunnableConfig, missing: dict[str, str]) -> dict[str, Any]:
        """Values of the old kind: the nearest ancestor rows that hold `missing` channels' versions inline.
        Each found value is stored as a blob, so the walk happens once per channel version."""
        found: dict[str, Any] = {}
        config: RunnableConfig | None = parent
        while missing and config is not None:
            row = super().get_tuple(config)
            if row is None:
                break
            values = row.checkpoint.get("channel_values") or {}
            versions = row.checkpoint.get("channel_versions") or {}
            for channel in [c for c, v in missing.items() if c in values and str(versions.get(c)) == v]:
                found[channel] = values[channel]
                type_, blob = self.serde.dumps_typed(values[channel])
                conf = row.config["configurable"]
                with self.cursor() as cur:
                    cur.execute(f"INSERT OR IGNORE INTO {BLOBS_TABLE} (thread_id, checkpoint_ns, channel, version, "
                                "type, blob) VALUES (?, ?, ?, ?, ?, ?)",
                                (str(conf["thread_id"]), conf.get("checkpoint_ns", ""), channel, missing.pop(channel),
                                 type_, blob))
            config = row.parent_config
        return found
