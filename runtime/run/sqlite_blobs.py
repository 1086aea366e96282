"""SQLite checkpoints that store a channel's value only when it changes, as `PostgresSaver` does.

LangGraph's `SqliteSaver` serializes the whole checkpoint, every channel's value included, at every
step. canvas2graph's state holds the conversation's history and the turn's outputs, so every step of a
turn stored them all again: a session grew with the square of its length (33 MB after 100 turns of the
`linear` parity case, `python -m bench.storage`). `PostgresSaver` instead keeps each channel's value in
a blob table keyed by (thread, namespace, channel, version) and writes a blob only for the channels a
step changed (`new_versions`); a checkpoint row then holds the versions, and reading it joins the
blobs back. `ChannelBlobSqliteSaver` does the same on SQLite, with LangGraph's `SqliteSaver` for
everything else (its tables, writes, serializer, locking and the checkpoint format itself).

Rows of both kinds live side by side, so a file written by an earlier canvas2graph keeps working with
no migration: a checkpoint row whose `channel_values` is filled (the old kind) is read as it is. The
first checkpoint this saver writes for a thread that has no blob yet stores every channel's value once
(an old session continuing, or a new one); later ones store only the changed channels. A blob missing
for a channel's version (a fork from an old-kind checkpoint of a thread that has blobs) is found in the
nearest ancestor row that holds the value inline, and stored.

Values of 2 KB or more are stored zlib-compressed (`CompressingSerializer`), as PostgreSQL compresses
its blobs.

Channels declared as LangGraph's `DeltaChannel` (the history and the globals, runtime/state.py) store
only a marker at most versions and, every so many updates, a snapshot; their value is rebuilt from the
nearest snapshot and the writes after it. `SqliteSaver.get_delta_channel_history` looks for snapshots in
the checkpoint rows only; `get_delta_channel_history` here looks in the blob table too (and in the rows
of the old kind), with LangGraph's own queries and helpers for the walk and the writes.

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

COMPRESS_FROM = 2048     # bytes: larger values are stored zlib-compressed (PostgreSQL's TOAST starts at 2 KB)
ZLIB = "+zlib"
BLOBS_TABLE = "checkpoint_blobs"
EMPTY = "empty"          # a channel that has a version and no value (as PostgresSaver marks it)
_SCHEMA = f"""CREATE TABLE IF NOT EXISTS {BLOBS_TABLE} (
    thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL DEFAULT '', channel TEXT NOT NULL,
    version TEXT NOT NULL, type TEXT NOT NULL, blob BLOB,
    PRIMARY KEY (thread_id, checkpoint_ns, channel, version))"""


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


class ChannelBlobSqliteSaver(SqliteSaver):
    """`SqliteSaver` keeping channel values in a blob table, one row per channel version (module doc)."""

    def setup(self) -> None:
        if self.is_setup:
            return
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
        # the first checkpoint of a thread in this layout stores every channel; later ones what changed
        changed = new_versions if self._has_blobs(thread_id, ns) else versions
        rows = []
        for channel, version in changed.items():
            type_, blob = self.serde.dumps_typed(values[channel]) if channel in values else (EMPTY, None)
            rows.append((thread_id, ns, channel, str(version), type_, blob))
        with self.cursor() as cur:       # the blobs first: a checkpoint row never names a missing blob
            cur.executemany(f"INSERT OR IGNORE INTO {BLOBS_TABLE} (thread_id, checkpoint_ns, channel, version, "
                            "type, blob) VALUES (?, ?, ?, ?, ?, ?)", rows)
        return super().put(config, {**checkpoint, "channel_values": {}}, metadata, new_versions)

    def _has_blobs(self, thread_id: str, ns: str) -> bool:
        with self.cursor(transaction=False) as cur:
            cur.execute(f"SELECT 1 FROM {BLOBS_TABLE} WHERE thread_id = ? AND checkpoint_ns = ? LIMIT 1", (thread_id, ns))
            return cur.fetchone() is not None

    def delete_thread(self, thread_id: str) -> None:
        super().delete_thread(thread_id)
        with self.cursor() as cur:
            cur.execute(f"DELETE FROM {BLOBS_TABLE} WHERE thread_id = ?", (str(thread_id),))

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
                            seeds[ch] = self.serde.loads_typed((row[0], row[1]))
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
                        loaded[channel] = self.serde.loads_typed((row[0], row[1]))
        if missing and found.parent_config is not None:
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
