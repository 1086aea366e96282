"""Decoded channel values of the blob rows a saver read last, so a conversation is not decoded at every turn.

A turn starts by rebuilding the conversation's history and globals (and the turn's outputs) from their last
snapshot: a blob row whose key names the channel's version, so it never changes once written. Decoding it
costs what the conversation holds (1.4 ms on SQLite, and on PostgreSQL the transfer besides, at 1,000 turns).
The savers (runtime/run/sqlite_blobs.py, runtime/run/postgres_saver.py) keep the values of the largest rows
they read or wrote last here, least recently used first out, up to `limit` bytes of rows as the saver reads
them; nothing of a session that has been idle while others ran stays.

Cached values are shared, as a channel's value is between LangGraph's steps: nothing may change them in place
(canvas2graph's reducers copy a list or dict before they add to it).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

KEEP_FROM = 4096            # bytes: smaller rows decode faster than they are worth keeping


class SnapshotCache:
    """Decoded blob values by (thread, namespace, channel, version)."""

    def __init__(self, limit: int):
        self.limit, self.size = limit, 0
        self.values: OrderedDict[tuple, tuple[Any, int]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: tuple) -> tuple[bool, Any]:
        """(True, value) when `key` is kept, else (False, None)."""
        with self.lock:
            if key not in self.values:
                return False, None
            self.values.move_to_end(key)
            return True, self.values[key][0]

    def load(self, key: tuple, type_: str, blob: bytes | None, serde) -> Any:
        """The value of a blob row: from the cache, else decoded (and kept when it is large)."""
        size = len(blob or b"")
        if size < KEEP_FROM:
            return serde.loads_typed((type_, blob))
        found, value = self.get(key)
        if not found:
            value = serde.loads_typed((type_, blob))
            self.keep(key, value, size)
        return value

    def keep(self, key: tuple, value: Any, size: int) -> None:
        """Keep a value (of `size` bytes as stored) as the blob row `key` holds it."""
        if size < KEEP_FROM:
            return
        with self.lock:
            if key not in self.values:
                self.values[key] = (value, size)
                self.size += size
                while self.size > self.limit and self.values:
                    self.size -= self.values.popitem(last=False)[1][1]

    def forget(self, thread_id: str) -> None:
        with self.lock:
            for key in [k for k in self.values if k[0] == thread_id]:
                self.size -= self.values.pop(key)[1]
