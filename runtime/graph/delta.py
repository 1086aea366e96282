"""A `DeltaChannel` that takes its snapshots as the value grows: what a long turn stores stays linear.

LangGraph's `DeltaChannel` stores a step's writes, not the channel's value, and every `snapshot_frequency`
updates the whole value (`_DeltaSnapshot`); reading a checkpoint replays the writes since the nearest
snapshot. A fixed frequency suits a value of bounded size. The turn's `outputs` are not bounded: one turn of
an Iteration over 10,000 items holds the list and, by its end, the 10,000 collected results, and a
snapshot every 20 updates would store that growing value 1,000 times, so the turn's bytes would grow with
the square of its items.

`GrowingDeltaChannel` snapshots once the updates since the last snapshot reach a fraction of the value's
size: `max(floor, weight / WEIGHT_PER_UPDATE)` updates, where the weight counts the value's entries (dict
keys and list items, three levels deep). Every snapshot is then paid for by the updates before it, so the
snapshots of a turn add up to a constant times its writes, and reading a checkpoint replays at most a
sixteenth of the value's entries in writes. LangGraph still snapshots any delta channel after an overwrite
(the start of every turn) and after `DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT` supersteps.

The weight is kept as writes arrive (their own entries, counted once) and counted afresh when a channel is
read from a checkpoint, so no step walks the whole value. It may overcount a value whose keys were written
over; that only spaces the snapshots further apart, never closer than the value's real size asks.

The policy is read through `snapshot_frequency`, the attribute LangGraph's checkpoint code consults
(`langgraph.pregel._checkpoint.delta_channels_to_snapshot`); everything else is `DeltaChannel`'s own.
"""
from __future__ import annotations

import copy as _copy
from typing import Any, Callable, Sequence

from langgraph.channels.binop import _get_overwrite
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import PendingWrite

WEIGHT_PER_UPDATE = 16      # a snapshot waits for one update per 16 entries of the value
DEPTH = 3                   # levels counted: outputs -> component -> key -> a list's items


def weight(value: Any, depth: int = DEPTH) -> int:
    """The entries of a JSON-like value, `depth` levels down (1 for a scalar or a string)."""
    if depth <= 0 or not isinstance(value, (dict, list, tuple)):
        return 1
    items = value.values() if isinstance(value, dict) else value
    return 1 + sum(weight(item, depth - 1) for item in items)


class GrowingDeltaChannel(DeltaChannel):
    """`DeltaChannel` whose snapshot frequency grows with the value (module doc). `snapshot_frequency` as a
    constructor argument is the floor: the frequency of a small value."""

    __slots__ = ("floor", "weight")

    def __init__(self, reducer: Callable[[Any, Sequence[Any]], Any], typ: type | None = None, *,
                 snapshot_frequency: int = 20) -> None:
        self.weight = 0
        super().__init__(reducer, typ, snapshot_frequency=snapshot_frequency)

    @property   # type: ignore[override]
    def snapshot_frequency(self) -> int:
        return max(self.floor, self.weight // WEIGHT_PER_UPDATE)

    @snapshot_frequency.setter
    def snapshot_frequency(self, value: int) -> None:
        self.floor = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GrowingDeltaChannel) and self.floor == other.floor and super().__eq__(other)

    def _like(self) -> GrowingDeltaChannel:
        new = self.__class__(self.reducer, self.typ, snapshot_frequency=self.floor)
        new.key = self.key
        return new

    def copy(self) -> GrowingDeltaChannel:
        new = self._like()
        new.value = self.value if not self.is_available() else _copy.copy(self.value)
        new.weight = self.weight
        return new

    def from_checkpoint(self, checkpoint: Any) -> GrowingDeltaChannel:
        loaded = super().from_checkpoint(checkpoint)
        new = self._like()
        new.value = loaded.value
        new.weight = weight(new.value)
        return new

    def replay_writes(self, writes: Sequence[PendingWrite]) -> None:
        super().replay_writes(writes)
        self.weight = weight(self.value)

    def update(self, values: Sequence[Any]) -> bool:
        changed = super().update(values)
        if changed:
            overwrite = next((v for v in values if _get_overwrite(v)[0]), None)
            if overwrite is not None or any(v is None for v in values):     # a reset: count what is left
                self.weight = weight(self.value)
            else:
                self.weight += sum(weight(v) - 1 for v in values)
        return changed
