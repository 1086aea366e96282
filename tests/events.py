"""Reading a turn's RAGFlow events in tests: what ran, what a component reported, how the turn ended."""
from __future__ import annotations


def trace(events: list[dict]) -> list[str]:
    """`node_started:<id>` / `node_finished:<id>`; other events by name only."""
    return [e["event"] + (":" + e["data"]["component_id"] if "component_id" in e["data"] else "") for e in events]


def finished(events: list[dict], cid: str) -> list[dict]:
    """The data of every node_finished of `cid`, in order."""
    return [e["data"] for e in events if e["event"] == "node_finished" and e["data"]["component_id"] == cid]


def user_inputs(events: list[dict]) -> dict:
    """The one user_inputs pause of a turn."""
    found = [e["data"] for e in events if e["event"] == "user_inputs"]
    assert len(found) == 1, trace(events)
    return found[0]


def final_content(events: list[dict]):
    """The content of the turn's workflow_finished (which must be its last event)."""
    assert events[-1]["event"] == "workflow_finished", trace(events)
    return events[-1]["data"]["outputs"]["content"]
