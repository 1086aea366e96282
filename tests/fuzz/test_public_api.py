"""The public API never leaks an internal error (issue 38): every fixture and parity DSL, agents and pipelines,
compiled with `canvas2graph.compile` and driven by `canvas2graph.ragflow_events` with generated queries, form
inputs and scripts, either runs to an end RAGFlow's events describe (finished, paused, stopped) or is refused with a
clear error (a pipeline: UsageError; a request no session can store: TurnRejected)."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from langgraph.checkpoint.memory import InMemorySaver

import canvas2graph
from canvas2graph import RunContext
from canvas2graph.runtime.services.scripted import Script
from canvas2graph.types import UsageError
from tests.fuzz import strategies as S
from tests.fuzz.properties import assert_encodable, time_limit

REPO = Path(__file__).resolve().parents[2]
PARITY = REPO.parent / "shared" / "parity" / "cases"


def _sources() -> list[Path]:
    found = [p for p in sorted((REPO / "fixtures").rglob("*.json"))
             if "script" not in p.name and not p.name.endswith((".eval.json",)) and _compiles(p)]
    found += sorted(PARITY.glob("*/dsl.json")) if PARITY.is_dir() else []
    return found


def _compiles(path: Path) -> bool:
    try:
        compiled, _ = canvas2graph.diagnose(path.read_text(encoding="utf-8"))
    except Exception:       # noqa: BLE001 - not a DSL (a dataset, a config)
        return False
    return compiled is not None


SOURCES = _sources()
GRAPHS: dict[Path, object] = {}


def _graph(path: Path):
    if path not in GRAPHS:
        GRAPHS[path] = canvas2graph.compile(path, checkpointer=InMemorySaver())
    return GRAPHS[path]


async def _drive(path: Path, query: str, inputs: dict | None, script: dict) -> str:
    from canvas2graph.types import TurnRejected
    graph = _graph(path)
    request = {"query": query, **({"inputs": inputs} if inputs else {})}
    config = {"configurable": {"thread_id": f"fuzz-{id(request)}"}}
    try:
        events = canvas2graph.ragflow_events(graph, request, config, context=RunContext(script=Script.load(script)))
        async for event in events:
            assert_encodable(event, f"a {event.get('event')} event")
    except UsageError as e:
        assert canvas2graph.compile_dsl(path.read_text(encoding="utf-8")).kind == "pipeline", e
        return "refused"
    except TurnRejected as e:
        assert "cannot be stored" in str(e), e
        return "refused"
    assert events.status in ("finished", "paused", "stopped"), (events.status, events.error)
    if events.status == "stopped":
        assert events.error, "a stopped run names why"
    return events.status


@pytest.mark.skipif(not SOURCES, reason="no DSL found")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(source=st.sampled_from(SOURCES or [Path("none")]), query=S.queries(), inputs=S.form_inputs(),
       script=S.scripts())
def test_every_fixture_and_parity_dsl_runs_to_an_end_or_is_refused_clearly(source, query, inputs, script):
    with time_limit(60):
        asyncio.run(_drive(source, query, inputs, script))


def test_the_sources_include_a_pipeline_and_the_parity_cases():
    kinds = {canvas2graph.compile_dsl(p.read_text(encoding="utf-8")).kind for p in SOURCES}
    assert kinds == {"agent", "pipeline"}
    if PARITY.is_dir():
        assert sum(1 for p in SOURCES if PARITY in p.parents) == len(list(PARITY.glob("*/dsl.json")))
