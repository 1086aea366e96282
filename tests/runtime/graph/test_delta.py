"""The turn's outputs are stored as writes (runtime/graph/state.py, runtime/graph/delta.py): a step stores what it
adds, an Iteration's collected lists grow by appends, and the whole value is snapshotted only as often as its
size pays for."""
from __future__ import annotations

from langgraph.checkpoint.serde.types import _DeltaSnapshot

from canvas2graph.runtime.graph.delta import WEIGHT_PER_UPDATE, GrowingDeltaChannel, weight
from canvas2graph.runtime.graph.state import (appended, merge_outputs, merge_values, overwrite, reduce_last,
                                              reduce_outputs)


def test_a_pass_appends_to_the_collected_list_and_other_keys_are_replaced():
    value = {"Iteration:A": {"summaries": None}, "LLM:B": {"content": "one"}}
    writes = [{"Iteration:A": {"summaries": appended(["one"])}, "LLM:B": {"content": "two"}},
              {"Iteration:A": {"summaries": appended(["two"])}}]
    assert reduce_outputs(value, writes) == {"Iteration:A": {"summaries": ["one", "two"]}, "LLM:B": {"content": "two"}}
    assert value == {"Iteration:A": {"summaries": None}, "LLM:B": {"content": "one"}}     # the value read is kept
    assert reduce_outputs(value, [None, {"begin": {"x": 1}}]) == {"begin": {"x": 1}}       # None starts the turn afresh


def test_batches_apply_as_one_write_after_another():
    """DeltaChannel's contract: replaying writes in any batches gives the same value."""
    writes = [{"A": {"l": appended([1])}}, {"A": {"l": appended([2]), "k": "x"}}, {"B": {"v": 1}},
              None, {"A": {"l": [7]}}, {"A": {"l": appended([8])}}, {"A": {"l": appended([9], 1)}}]
    whole = reduce_outputs({"A": {"l": [0]}}, writes)
    assert whole == {"A": {"l": [7, 9]}}
    for cut in range(len(writes) + 1):
        assert reduce_outputs(reduce_outputs({"A": {"l": [0]}}, writes[:cut]), writes[cut:]) == whole


def test_two_updates_merge_into_one_that_still_appends():
    """A fused step merges its components' updates before the channel sees them (compiler/fusion.py)."""
    both = merge_outputs({"A": {"l": appended([1])}}, {"A": {"l": appended([2])}})
    assert reduce_outputs({"A": {"l": [0]}}, [both]) == {"A": {"l": [0, 1, 2]}}
    assert merge_values({"l": [0], "k": 1}, {"l": appended([1]), "k": 2}) == {"l": [0, 1], "k": 2}


def test_last_keeps_the_later_component_in_path_order_within_a_step():
    first, second = {"component_id": "B", "rank": [3, 2]}, {"component_id": "A", "rank": [3, 1]}
    assert reduce_last({}, [first, second]) == first
    assert reduce_last({}, [overwrite(second)]) == second


def test_the_weight_counts_entries_three_levels_down():
    assert weight("text") == 1
    assert weight({"A": {"l": list(range(100)), "k": "x"}}) == 1 + 1 + (1 + 100) + 1
    assert weight([[1, [2, 3]]], depth=2) == 1 + (1 + 1 + 1)


def _channel(floor: int = 20) -> GrowingDeltaChannel:
    channel = GrowingDeltaChannel(reduce_outputs, dict, snapshot_frequency=floor)
    channel.key = "outputs"
    return channel.from_checkpoint(None)


def test_snapshots_space_out_as_the_value_grows():
    channel = _channel()
    assert channel.snapshot_frequency == 20             # a small value: every 20 updates, as before
    channel.update([{"Split:S": {"result": [f"item{i}" for i in range(10_000)]}}])
    assert channel.snapshot_frequency >= 10_000 // WEIGHT_PER_UPDATE
    before = channel.snapshot_frequency
    for i in range(200):
        channel.update([{"Iteration:A": {"summaries": appended([f"s{i}"])}}])
    assert channel.snapshot_frequency >= before          # growing: the next snapshot waits longer
    # a reset (the start of a turn) counts the value afresh
    channel.update([overwrite({"begin": {}})])
    assert channel.snapshot_frequency == 20


def test_copies_and_checkpoints_keep_the_policy():
    channel = _channel(floor=7)
    channel.update([{"A": {"l": list(range(1_000))}}])
    copy = channel.copy()
    assert (copy.floor, copy.weight, copy.get()) == (7, channel.weight, channel.get())
    restored = channel.from_checkpoint(_DeltaSnapshot(channel.get()))
    assert restored.floor == 7 and restored.weight == weight(channel.get())
    assert restored.snapshot_frequency == channel.snapshot_frequency
    assert _channel(floor=7) == _channel(floor=7) and _channel(floor=7) != _channel(floor=8)
