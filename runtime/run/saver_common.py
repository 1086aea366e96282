"""What canvas2graph's two checkpointers share (runtime/run/sqlite_blobs.py, runtime/run/postgres_saver.py): the
snapshot cache each keeps (its size is the saver's `CACHE_BYTES`) and the channel versions they write."""
from __future__ import annotations

from canvas2graph.runtime.run.snapshot_cache import SnapshotCache
from canvas2graph.runtime.run.versions import next_version


class CanvasSaverMixin:
    """Put before LangGraph's saver in the bases, so its `get_next_version` is the one used."""

    CACHE_BYTES: int = 0

    @property
    def cache(self) -> SnapshotCache:
        if not hasattr(self, "_cache"):
            self._cache = SnapshotCache(self.CACHE_BYTES)
        return self._cache

    def get_next_version(self, current: str | None, channel: None) -> str:
        return next_version(current)        # LangGraph's counter, a shorter random part (runtime/run/versions.py)
