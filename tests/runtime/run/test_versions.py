"""Channel versions (runtime/run/versions.py): they order as LangGraph's own do, an earlier release's version is
older than the next one made from it, and two forks of one version get different ones."""
from __future__ import annotations

from langgraph.checkpoint.postgres.base import BasePostgresSaver

from canvas2graph.runtime.run.versions import next_version


def test_versions_compare_as_strings_in_the_order_they_were_made():
    versions = [next_version(None)]
    for _ in range(1200):                      # past 999 -> 1000, where unpadded numbers would misorder
        versions.append(next_version(versions[-1]))
    assert versions == sorted(versions)
    assert [int(v.split(".")[0]) for v in versions] == list(range(1, 1202))


def test_a_version_of_an_earlier_release_is_older_than_the_next_one():
    langgraphs = BasePostgresSaver.get_next_version(None, None, None)      # what a stored session holds
    for _ in range(98):
        langgraphs = BasePostgresSaver.get_next_version(None, langgraphs, None)
    ours = next_version(langgraphs)
    assert ours > langgraphs and int(ours.split(".")[0]) == 100
    assert max([langgraphs, ours]) == ours        # LangGraph takes the max of a checkpoint's versions
    assert next_version(7) > next_version(6)      # InMemorySaver's integer versions


def test_two_forks_of_one_version_get_different_versions():
    base = next_version(next_version(None))
    assert len({next_version(base) for _ in range(1000)}) == 1000
