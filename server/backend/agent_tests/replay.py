"""Run a regression case again and say what differs (`canvas2graph test`, the pytest plugin).

A case runs offline: its script stands in for every model and scripted tool (one script for the whole
case, consumed turn after turn as the session consumed the replies), each turn goes through the same
`Runner` as `canvas2graph run`, on a LangGraph `InMemorySaver`, and what the turn did is read back from
its checkpoints (`observe`) and compared with the turn's expectations (`matching`).
"""
from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from canvas2graph.server.backend.agent_tests.case import Case, CaseError, Turn
from canvas2graph.server.backend.agent_tests.matching import MatchError, match, subset_problems
from canvas2graph.server.backend.agent_tests.observe import observe_session

__all__ = ["CaseResult", "TurnResult", "run_case", "compare_turn", "updated_expect", "event_pattern", "load_dsl"]


@dataclass
class TurnResult:
    index: int
    observed: dict
    events: list[dict]
    differences: list[str] = field(default_factory=list)


@dataclass
class CaseResult:
    case: Case
    turns: list[TurnResult] = field(default_factory=list)
    error: str | None = None            # the case could not run (its DSL does not compile, say)
    dsl: str = ""                       # which DSL ran: the case's, `--dsl`'s or a stored agent's

    @property
    def passed(self) -> bool:
        return self.error is None and not any(t.differences for t in self.turns)

    def report(self) -> str:
        """What differs, a line per difference, turn by turn (empty when it passed)."""
        if self.error:
            return f"error: {self.error}"
        lines = []
        for turn in self.turns:
            for difference in turn.differences:
                lines.append(f"turn {turn.index + 1}: {difference}")
        return "\n".join(lines)


async def load_dsl(case: Case, dsl: str | None, db: str | None) -> tuple[Any, str]:
    """(the DSL to run, where it came from): `dsl` (the changed agent) over the case's own."""
    if dsl:
        try:
            return Path(dsl).read_bytes(), dsl
        except OSError as e:
            raise CaseError(f"cannot read {dsl}: {e.strerror}")
    if case.dsl:
        return case.dsl_path().read_bytes(), str(case.dsl_path())
    from canvas2graph.server.backend.store import open_store
    agent_id, version_id = case.agent["id"], case.agent.get("version")
    if not db:
        raise CaseError(f"{case.path}: `agent`: the case runs stored agent {agent_id}: give the database with --db")
    async with open_store(db) as store:
        agent = await store.find_agent(agent_id)
        if agent is None:
            raise CaseError(f"{case.path}: `agent`: {db} has no agent {agent_id}")
        if not version_id:
            return agent.dsl, f"agent {agent_id}"
        version = await store.get_version(agent.tenant, agent_id, version_id)
        if version is None:
            raise CaseError(f"{case.path}: `agent.version`: agent {agent_id} has no version {version_id}")
        return version.dsl, f"agent {agent_id} version {version_id}"


def _files(case: Case, turn: Turn) -> list | None:
    if not turn.files:
        return None
    from canvas2graph.runtime.services.files import default_store
    store = default_store()
    return [store.put(Path(name).name, (case.folder / name).read_bytes()) for name in turn.files]


async def run_case(case: Case, *, dsl: str | None = None, db: str | None = None) -> CaseResult:
    """Run every turn of `case` (against `dsl` when given) and compare each with its expectations."""
    from canvas2graph.types import CompileError
    from canvas2graph.compiler.canvas import compile_dsl
    result = CaseResult(case)
    try:
        source, result.dsl = await load_dsl(case, dsl, db)
        compiled = compile_dsl(source)
    except CaseError as e:
        result.error = str(e)
        return result
    except CompileError as e:
        result.error = f"{result.dsl} does not compile:\n  " + "\n  ".join(str(d) for d in e.diagnostics)
        return result
    from langgraph.checkpoint.memory import InMemorySaver
    from canvas2graph.runtime.services.environment import RunEnvironment, RunSettings
    from canvas2graph.runtime.services.models import ModelFactory
    from canvas2graph.runtime.services.scripted import Script, ScriptError
    from canvas2graph.runtime.run.runner import Runner
    try:
        script = Script.load(copy.deepcopy(case.script_data()))
    except (ScriptError, CaseError) as e:
        result.error = f"{case.path}: `script`: {e}"
        return result
    environment = RunEnvironment(RunSettings(db=db))
    runner = Runner(compiled, InMemorySaver(), ModelFactory(script=script), script,
                    services=environment.services(compiled.plan.dsl.components), name=case.name)
    session = f"case-{uuid.uuid4()}"
    try:
        for index, turn in enumerate(case.turns):
            observed, events = await _run_turn(runner, session, case, turn)
            result.turns.append(TurnResult(index, observed, events, compare_turn(turn.expect, observed, events)))
    except MatchError as e:
        result.error = f"{case.path}: {e}"
    finally:
        await environment.aclose()
    return result


async def _run_turn(runner, session: str, case: Case, turn: Turn) -> tuple[dict, list[dict]]:
    from canvas2graph.runtime.run.runner import TurnFailed, TurnRejected, TurnRequest
    events: list[dict] = []
    try:
        request = TurnRequest(query=turn.query, inputs=turn.inputs, files=_files(case, turn))
        async for event in runner.run_turn(session, request):
            events.append(event)
    except TurnRejected as e:
        return {"status": "rejected", "answer": "", "path": [], "components": {}, "error": str(e)}, events
    except TurnFailed:
        pass
    message_id = events[0].get("message_id") if events else None
    turns = await observe_session(runner.graph, session)
    observed = next((t for t in turns if message_id and t["message_id"] == message_id), turns[-1] if turns else None)
    if observed is None:
        observed = {"status": runner.outcome.status, "answer": "", "path": [], "components": {}}
    if runner.outcome.error and not observed.get("error"):
        observed["error"] = runner.outcome.error
    return observed, events


def _events(patterns: list[dict], events: list[dict]) -> list[str]:
    """Each pattern (a JSON subset of an event) is found in order among the turn's events."""
    position = 0
    for n, pattern in enumerate(patterns):
        found = next((i for i in range(position, len(events)) if not subset_problems(pattern, events[i])), None)
        if found is None:
            names = ", ".join(e.get("event", "?") for e in events[position:]) or "none"
            return [f"events[{n}]: no event like {_short(pattern)} (events from there: {names})"]
        position = found + 1
    return []


def _short(value: Any) -> str:
    import json
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) < 200 else text[:200] + "…"


def compare_turn(expect: dict, observed: dict, events: list[dict]) -> list[str]:
    """The differences between a turn's expectations and what it did."""
    problems: list[str] = []
    if "status" in expect:
        problems += match(expect["status"], observed["status"], "status")
        if problems and observed.get("error"):
            problems.append(f"the turn's error: {observed['error']}")
    if "answer" in expect:
        problems += match(expect["answer"], observed["answer"], "answer")
    if "path" in expect:
        problems += match(expect["path"], observed["path"], "path")
    if "events" in expect:
        problems += _events(expect["events"], events)
    for cid, spec in (expect.get("components") or {}).items():
        seen = observed["components"].get(cid)
        if seen is None:
            problems.append(f"component {cid} did not run")
            continue
        for name, value in (spec.get("outputs") or {}).items():
            if name not in seen.get("outputs", {}):
                problems.append(f"{cid} output {name}: missing (its outputs: {', '.join(seen.get('outputs', {})) or 'none'})")
            else:
                problems += match(value, seen["outputs"][name], f"{cid} output {name}")
        if "messages" in spec:
            problems += match(spec["messages"], seen.get("messages"), f"{cid} prompt")
    return problems


def event_pattern(event: dict) -> dict:
    """An event as `--update` writes it: its name and, for a component's event, the component."""
    data = event.get("data") or {}
    pattern: dict[str, Any] = {"event": event.get("event")}
    if data.get("component_id"):
        pattern["data"] = {"component_id": data["component_id"]}
    return pattern


def _kept(expected: Any, actual: Any, what: str) -> Any:
    """An expectation that still holds keeps its form (a `contains`, a regex); else the actual value."""
    return expected if not match(expected, actual, what) else actual


def updated_expect(expect: dict, observed: dict, events: list[dict]) -> dict:
    """The turn's expectations rewritten from what it did now (`--update`): the same keys, the same
    components; what still holds is kept as written."""
    keys = expect or {"status": None, "answer": None, "path": None}
    new: dict[str, Any] = {}
    for key in ("status", "answer", "path"):
        if key in keys:
            new[key] = _kept(expect[key], observed[key], key) if key in expect else observed[key]
    if "events" in keys:
        new["events"] = expect["events"] if not _events(expect["events"], events) else [event_pattern(e) for e in events]
    components = {}
    for cid, spec in (expect.get("components") or {}).items():
        seen = observed["components"].get(cid)
        if seen is None:
            continue                    # no longer runs: its expectations go (the path says so)
        item: dict[str, Any] = {}
        if "outputs" in spec:
            outputs = seen.get("outputs", {})
            item["outputs"] = {name: _kept(value, outputs[name], name) for name, value in spec["outputs"].items()
                               if name in outputs}
        if "messages" in spec:
            item["messages"] = _kept(spec["messages"], seen.get("messages"), "messages")
        components[cid] = item
    if components:
        new["components"] = components
    return new
