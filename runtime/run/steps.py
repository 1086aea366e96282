"""The step trace of a session, read from its LangGraph checkpoints, and forks from any of its steps.

Every step of a turn is a LangGraph superstep, saved as a checkpoint of the session's thread with the
writes of the tasks that ran from it. `atrace(graph, config)` reads them back with LangGraph's own
`aget_state_history` and lays them out as turns of steps:

    [{"turn": 1, "query": "...", "status": "finished", "message_id": "...", "started_at": 1.7e9,
      "steps": [{"step": 1, "checkpoint_id": "...", "component_id": "LLM:A", "component_name": "...",
                 "component_type": "LLM", "inputs": {...}, "outputs": {...}, "elapsed": 0.01, "error": None,
                 "messages": [...], "usage": {...}, "tool_calls": [...]}, ...]}, ...]

- a turn is one run of the graph: a request, the answer to a paused form, or a fork. `ragflow_events`
  names each run's checkpoints with its message id (checkpoint metadata `message_id`); runs made
  without it (a plain `graph.invoke`) start a turn at each input;
- `step` is LangGraph's superstep that ran the component (components that ran in parallel share it);
  `checkpoint_id` is the checkpoint the step ran from: a fork from it runs the step again;
- `messages` (the prompt sent to the model), `usage` (its tokens) and `tool_calls` (an Agent's tool
  calls) appear when the component made them (runtime/graph/calls.py records them at the node);
- the trace follows the thread's current branch, from its newest checkpoint back to its first (or from
  `config`'s `checkpoint_id`: that checkpoint's branch up to it). Branches left by forks stay in the
  checkpointer and are traced by naming one of their checkpoints.

`fork_plan(...)` checks a fork's request against a traced step, and `afork_run`/`ragflow_events` run
it: LangGraph's time travel, `astream(None, {checkpoint_id})`, which re-runs the step's tasks on a new
branch of the same thread (the old branch stays); the edited component takes its new inputs or its
given outputs from the run's context (`RunContext.overrides`), and a form (UserFillUp, Begin) is
answered with `Command(resume=...)`. After a fork the thread's newest checkpoint is the new branch's,
so the session continues from it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from canvas2graph.runtime.graph.calls import image_summaries
from canvas2graph.runtime.run.events import CANCELLED_TEXT, FINISH, HANDLER_PREFIX, MESSAGE_ID
from canvas2graph.runtime.graph.state import LAST, LOOPS, OUTPUTS, REQUEST, merge_values, overwritten
from canvas2graph.runtime.graph.values import is_pending

__all__ = ["atrace", "trace", "atrace_message", "turn_of", "ForkError", "ForkPlan", "fork_plan", "FORMS"]

FORMS = {"UserFillUp", "Begin"}         # components whose inputs are a form's answers
_CANCELLED = ("TurnCancelled", "CancelledError")
_REPR = re.compile(r"^\w+\((['\"])(.*)\1\)$", re.S)


class ForkError(ValueError):
    """A fork request that does not fit the session: `field` names what is wrong (for a 4xx reply)."""

    def __init__(self, field_name: str, message: str):
        super().__init__(message)
        self.field = field_name


def _timestamp(text: str | None) -> float:
    if not text:
        return 0.0
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _thread_config(config: dict) -> dict:
    configurable = dict(config.get("configurable") or {})
    configurable.pop("checkpoint_id", None)
    configurable.setdefault("checkpoint_ns", "")
    return {**config, "configurable": configurable}


async def _lineage(graph, config: dict) -> tuple[list, list]:
    """The snapshots of one branch, oldest first: from `config`'s checkpoint (else the newest) back to the
    first; and every snapshot of the thread, newest first."""
    history = [snapshot async for snapshot in _light(graph).aget_state_history(_thread_config(config))]
    head = (config.get("configurable") or {}).get("checkpoint_id")
    if head and not any(s.config["configurable"]["checkpoint_id"] == head for s in history):
        await _refuse_compacted(graph, config, head)
    return _branch(history, config), history


def _light(graph):
    """The graph reading steps without rebuilding the history and the globals, which the trace does not show
    (runtime/run/retention.py, `without_conversation`)."""
    from canvas2graph.runtime.run.retention import without_conversation
    return without_conversation(graph)


async def _compacted(graph, config: dict) -> list[dict]:
    """The stored traces of the thread's compacted turns (runtime/run/retention.py), oldest first."""
    from canvas2graph.runtime.run.retention import compacted_turns
    thread_id = (config.get("configurable") or {}).get("thread_id")
    return await compacted_turns(graph.checkpointer, thread_id) if thread_id is not None else []


async def _refuse_compacted(graph, config: dict, checkpoint_id: str) -> None:
    for turn in await _compacted(graph, config):
        if any(step.get("checkpoint_id") == checkpoint_id for step in turn.get("steps") or []):
            raise ForkError("checkpoint_id", f"checkpoint {checkpoint_id} is a step of turn {turn['turn']}, whose steps "
                                             "were compacted: only its trace is kept (every step is kept for the last "
                                             "CANVAS2GRAPH_KEEP_TURNS turns), so it cannot be forked or traced as a branch")


def _after_compacted(compacted: list[dict], turns: list[dict]) -> list[dict]:
    """The compacted turns, then the live ones numbered after them."""
    if not compacted:
        return turns
    offset = len(compacted)
    for turn in turns:
        turn["turn"] += offset
        if "fork_of" in turn:
            turn["fork_of"] += offset
    return compacted + turns


def _branch(history: list, config: dict) -> list:
    snapshots = {snapshot.config["configurable"]["checkpoint_id"]: snapshot for snapshot in history}
    newest = history[0].config["configurable"]["checkpoint_id"] if history else None     # newest first
    head = (config.get("configurable") or {}).get("checkpoint_id") or newest
    if head is not None and head not in snapshots:
        raise ForkError("checkpoint_id", f"checkpoint {head} is not a checkpoint of this session")
    chain = []
    while head is not None and head in snapshots:
        snapshot = snapshots[head]
        chain.append(snapshot)
        parent = snapshot.parent_config
        head = parent["configurable"].get("checkpoint_id") if parent else None
    chain.reverse()
    return chain


def _result(task) -> dict:
    result = task.result
    if isinstance(result, list):
        result = dict(result)
    return result if isinstance(result, dict) else {}


def _error_text(error: Any) -> str | None:
    if error is None:
        return None
    if isinstance(error, dict):          # how some checkpointers keep an exception
        return str(error.get("message") or error)
    if isinstance(error, str):           # LangGraph keeps a task's exception as its repr: "Name('text')"
        match = _REPR.match(error)
        return match.group(2) if match else error
    message = getattr(error, "message", None)
    return str(message) if message else (str(error) or type(error).__name__)


class _Builder:
    def __init__(self, canvas):
        self.nodes = canvas.node_by_name() if canvas is not None else {}
        self.parallel = canvas.parallel if canvas is not None else {}
        self.fused = canvas.fused if canvas is not None else {}
        self.by_id = {node.id: node for node in self.nodes.values()}
        self.turns: list[dict] = []
        self.run_key: Any = object()
        self.by_component: dict[str, dict] = {}     # component id -> its last step in this turn

    def fused_nodes(self, name: str) -> list:
        """The components a fused node ran (compiler/fusion.py), in order; [] for any other node."""
        return [self.by_id[cid] for cid in self.fused.get(name, [])]

    def node(self, name: str):
        if name.startswith(HANDLER_PREFIX):
            return self.nodes.get(name[len(HANDLER_PREFIX):])
        return self.nodes.get(name)

    def open_turn(self, key: Any, snapshot, message_id: str | None) -> dict:
        self.run_key = key
        turn = {"turn": len(self.turns) + 1, "query": "", "status": "running", "message_id": message_id,
                "started_at": _timestamp(snapshot.created_at), "steps": []}
        self.turns.append(turn)
        self.by_component = {}
        return turn

    def add_step(self, turn: dict, snapshot, task, node, *, paused: bool = False) -> dict:
        result = {} if paused else _result(task)
        written = overwritten(result.get(OUTPUTS)) or {}
        last = result.get(LAST) or {}
        outputs = dict(written.get(node.id) or {})
        pending = next((v for v in outputs.values() if is_pending(v)), None)
        if pending is not None:     # a generation a Message streams: its text arrives with the Message's step
            outputs = {k: (None if is_pending(v) else v) for k, v in outputs.items()}
        error = None if paused else (_error_text(task.error) or outputs.get("_ERROR") or None)
        if error and _cancelled(task.error):
            error = CANCELLED_TEXT      # stopped by a cancel request (at this node's boundary, or mid-run)
        step = {"step": (snapshot.metadata or {}).get("step", -1) + 1,
                "checkpoint_id": snapshot.config["configurable"]["checkpoint_id"],
                "component_id": node.id, "component_name": node.display_name,
                "component_type": node.component_type,
                "inputs": dict(last.get("inputs") or {}) if last.get("component_id") == node.id
                else dict((last.get("fused") or {}).get(node.id) or {}),
                "outputs": outputs, "elapsed": outputs.get("_elapsed_time", 0.0), "error": error,
                "started_at": _timestamp(snapshot.created_at)}
        if task.interrupts:
            form = task.interrupts[0].value if hasattr(task.interrupts[0], "value") else task.interrupts[0]
            step["form"] = form if isinstance(form, dict) else {"value": form}
        if pending is not None and pending.get("messages"):
            step["messages"] = image_summaries(pending["messages"])
        # writes to other components (a Message recording the content of the LLM it streamed)
        for cid, values in written.items():
            if cid != node.id and cid in self.by_component and isinstance(values, dict):
                other = self.by_component[cid]
                other["outputs"] = merge_values(other["outputs"], values)
                other["elapsed"] = other["outputs"].get("_elapsed_time", other["elapsed"])
        # what the step asked of models and tools: its own calls, or a producer's (a Message streaming an LLM)
        for cid, record in (last.get("calls") or {}).items():
            target = step if cid == node.id else self.by_component.get(cid)
            if target is not None:
                _add_calls(target, record)
        if node.id in self.parallel:        # an Iteration whose items run at once (compiler/parallel.py)
            step["max_concurrency"] = self.parallel[node.id]
        turn["steps"].append(step)
        self.by_component[node.id] = step
        return step

    def add_item(self, turn: dict, snapshot, task) -> None:
        """One item of a parallel Iteration, as a step of the Iteration: its index and what it collected.
        (The item's components ran in its item graph, which keeps no checkpoints: the item is the step.)"""
        from canvas2graph.compiler.parallel import ITEM_KEY, ITEMS_PREFIX
        node = self.node(task.name[len(ITEMS_PREFIX):]) if task.name.startswith(ITEMS_PREFIX) else None
        if node is None:
            return
        collected = ((overwritten(_result(task).get(LOOPS)) or {}).get(node.id) or {})
        index, outputs = next(((int(k[len(ITEM_KEY):]), v) for k, v in collected.items() if k.startswith(ITEM_KEY)),
                              (None, {}))
        turn["steps"].append({
            "step": (snapshot.metadata or {}).get("step", -1) + 1,
            "checkpoint_id": snapshot.config["configurable"]["checkpoint_id"],
            "component_id": node.id, "component_name": node.display_name, "component_type": node.component_type,
            "item": index, "max_concurrency": self.parallel.get(node.id, 1), "inputs": {},
            "outputs": outputs if isinstance(outputs, dict) else {}, "elapsed": 0.0,
            "error": _error_text(task.error), "started_at": _timestamp(snapshot.created_at)})


def _add_calls(step: dict, record: dict) -> None:
    """A step's record of model and tool calls (runtime/graph/calls.py), added to what the step has."""
    for key, value in record.items():
        if key == "usage" and "usage" in step:
            step["usage"] = {k: step["usage"].get(k, 0) + value.get(k, 0) for k in {**step["usage"], **value}}
        elif key == "tool_calls" and "tool_calls" in step:
            step["tool_calls"] = step["tool_calls"] + value
        else:
            step.setdefault(key, value)


def _query(snapshot, turn: dict) -> None:
    for task in snapshot.tasks:
        result = _result(task)
        request = result.get(REQUEST)
        if task.name == "__start__" and isinstance(result.get("query"), str):
            turn["query"] = turn["query"] or result["query"]
        elif isinstance(request, dict) and request.get("open") and isinstance(request.get("query"), str):
            turn["query"] = turn["query"] or request["query"]


def _build(canvas, chain: list, history: list = ()) -> list[dict]:
    builder = _Builder(canvas)
    turn: dict | None = None
    counter = 0
    for index, snapshot in enumerate(chain):
        metadata = snapshot.metadata or {}
        child = chain[index + 1] if index + 1 < len(chain) else None
        child_meta = (child.metadata or {}) if child is not None else {}
        if child_meta.get("source") == "fork" and child_meta.get("step") == metadata.get("step", -2) + 1:
            continue                # a fork ran this checkpoint's tasks again: the branch has the new run's
        # (LangGraph's time travel saves the fork one step after the checkpoint it runs again; a "__copy__"
        # of a checkpoint is made beside it, two steps after its parent, whose tasks did run)
        # the run that ran this checkpoint's tasks made the next checkpoint (a paused or stopped one: this one)
        run_meta = child_meta if child_meta.get("source") == "loop" else metadata
        message_id = run_meta.get(MESSAGE_ID) or metadata.get(MESSAGE_ID)
        if metadata.get("source") in ("input", "fork") and not metadata.get(MESSAGE_ID):
            counter += 1            # without message ids, a run starts at an input or a fork
        key = message_id or ("run", counter)
        ended = (snapshot.values.get(REQUEST) or {}).get("ended") if metadata.get("source") == "update" else None
        if ended and turn is not None:
            turn["ended"] = ended           # closed by the Runner: a turn cancelled between two steps, say
        ran = [t for t in snapshot.tasks if t.result is not None or t.error is not None or t.interrupts]
        if not ran:
            continue
        paused_by = metadata.get(MESSAGE_ID)
        if paused_by and paused_by != message_id and any(t.interrupts for t in ran):
            # the run that paused here ends with the form; the run that answered it is the next turn
            if turn is None or builder.run_key != paused_by:
                turn = builder.open_turn(paused_by, snapshot, paused_by)
                _query(snapshot, turn)
            for task in ran:
                node = builder.node(task.name)
                if task.interrupts and node is not None:
                    builder.add_step(turn, snapshot, task, node, paused=True)
        if turn is None or key != builder.run_key:
            previous = turn
            turn = builder.open_turn(key, snapshot, message_id)
            if metadata.get("source") == "fork" and previous is not None:
                turn["fork_of"] = previous["turn"]
                turn["query"] = previous["query"]
        _query(snapshot, turn)
        for task in ran:
            node = builder.node(task.name)
            if task.name == FINISH or node is None:
                builder.add_item(turn, snapshot, task)
                continue
            for component in builder.fused_nodes(task.name) or [node]:   # a fused chain: a step per component
                builder.add_step(turn, snapshot, task, component)
    _statuses(builder.turns, chain, history)
    return builder.turns


def _cancelled(error: Any) -> bool:
    """A task's error that says a cancel stopped it: at its node boundary (TurnCancelled) or mid-run (LangGraph
    records the CancelledError of a task it cancelled, as Runner.cancel's immediate stop does)."""
    return any(name in f"{type(error).__name__} {error}" for name in _CANCELLED)


def _ended(snapshot) -> str:
    """How a run that stopped at `snapshot` (its newest checkpoint) ended."""
    failed = [t.error for t in snapshot.tasks if t.error is not None]
    if failed:
        return "cancelled" if any(_cancelled(e) for e in failed) else "failed"
    if any(t.interrupts for t in snapshot.tasks):
        return "paused"
    if (snapshot.values.get(REQUEST) or {}).get("open") or snapshot.next:
        return "running"
    return "finished"


def _statuses(turns: list[dict], chain: list, history: list = ()) -> None:
    head = chain[-1] if chain else None
    forked = {t["fork_of"] for t in turns if "fork_of" in t}
    for i, turn in enumerate(turns):
        last_turn = i == len(turns) - 1
        if turn["turn"] in forked and turn["message_id"]:
            # cut short on this branch by a fork: how the run itself ended, at its newest checkpoint
            end = next((h for h in history if (h.metadata or {}).get(MESSAGE_ID) == turn["message_id"]), None)
            if end is not None:
                turn["status"] = _ended(end)
                continue
        errors = [s["error"] for s in turn["steps"] if s["error"]]
        ended = turn.pop("ended", None)
        if CANCELLED_TEXT in errors or ended == "cancelled":
            turn["status"] = "cancelled"
        elif errors or ended == "failed":
            turn["status"] = "failed"
        elif turn["steps"] and "form" in turn["steps"][-1] and not turn["steps"][-1]["outputs"]:
            turn["status"] = "paused"
        elif last_turn and head is not None and ((head.values.get(REQUEST) or {}).get("open") or head.next):
            turn["status"] = "paused" if any(t.interrupts for t in head.tasks) else "running"
        else:
            turn["status"] = "finished"


async def atrace(graph, config: dict) -> list[dict]:
    """The trace of the thread `config` names (`thread_id`; a `checkpoint_id` traces that checkpoint's branch)."""
    from canvas2graph.compiler.canvas import canvas_of
    chain, history = await _lineage(graph, config)
    return _after_compacted(await _compacted(graph, config), _build(canvas_of(graph), chain, history))


def _heads(history: list) -> list:
    """The newest checkpoint of every branch of a thread (one no other checkpoint names as its parent),
    newest first, as `history` is."""
    parents = {s.parent_config["configurable"].get("checkpoint_id") for s in history if s.parent_config}
    return [s for s in history if s.config["configurable"]["checkpoint_id"] not in parents]


async def abranches(graph, config: dict) -> list[dict]:
    """Every branch of the thread a fork left, newest first: {checkpoint_id (its newest checkpoint, which
    `atrace` takes to trace it), current, turns, query (its last turn's; a fork's as edited), status,
    started_at, fork_of}."""
    from canvas2graph.compiler.canvas import canvas_of
    history = [snapshot async for snapshot in _light(graph).aget_state_history(_thread_config(config))]
    if not history:
        return []
    canvas = canvas_of(graph)
    current = history[0].config["configurable"]["checkpoint_id"]
    out = []
    for head in _heads(history):
        checkpoint_id = head.config["configurable"]["checkpoint_id"]
        turns = _build(canvas, _branch(history, {"configurable": {"checkpoint_id": checkpoint_id}}), history)
        if not turns:
            continue
        last = turns[-1]
        # a fork's question as it was edited (the forked step's `sys.query`), else the turn's own
        edited = ((last["steps"][0].get("inputs") or {}).get("sys.query") if last.get("fork_of") and last["steps"]
                  else None)
        out.append({"checkpoint_id": checkpoint_id, "current": checkpoint_id == current, "turns": len(turns),
                    "query": edited if isinstance(edited, str) else last["query"], "status": last["status"], "started_at": last["started_at"],
                    "fork_of": last.get("fork_of")})
    return out


def trace(graph, config: dict) -> list[dict]:
    """`atrace` for synchronous callers: the graph's synchronous `get_state_history` (a sync checkpointer)."""
    from canvas2graph.compiler.canvas import canvas_of
    history = list(_light(graph).get_state_history(_thread_config(config)))
    return _build(canvas_of(graph), _branch(history, config), history)


def turn_of(turns: list[dict], message_id: str) -> dict | None:
    return next((t for t in turns if t["message_id"] == message_id), None)


async def atrace_message(graph, config: dict, message_id: str) -> dict | None:
    """The turn of the run that sent `message_id`, whichever branch of the thread holds it (a fork leaves
    the run it cut short on the old branch, whole); None when no checkpoint names it."""
    from canvas2graph.compiler.canvas import canvas_of
    thread = _thread_config(config)
    head = None
    async for snapshot in _light(graph).aget_state_history(thread, filter={MESSAGE_ID: message_id}, limit=1):
        head = snapshot.config["configurable"]["checkpoint_id"]
    if head is None:
        return turn_of(await _compacted(graph, thread), message_id)
    chain, history = await _lineage(graph, {**thread, "configurable": {**thread["configurable"], "checkpoint_id": head}})
    return turn_of(_build(canvas_of(graph), chain, history), message_id)


# --- forks ------------------------------------------------------------------------------------------
@dataclass
class ForkPlan:
    """How to run a fork: `config` names the checkpoint, `overrides` go into the run's context, `resume`
    answers a form; `query` is the forked turn's; `forks` the message id of the turn it runs again (a client
    shows the fork as another version of that turn)."""
    config: dict
    component_id: str
    component_type: str
    query: str = ""
    overrides: dict[str, dict] = field(default_factory=dict)
    resume: dict | None = None
    forks: str | None = None


def _step_at(turns: list[dict], checkpoint_id: str, component_id: str | None) -> tuple[dict, dict]:
    found = [(t, s) for t in turns for s in t["steps"] if s["checkpoint_id"] == checkpoint_id]
    if component_id:
        found = [(t, s) for t, s in found if s["component_id"] == component_id]
        if not found:
            raise ForkError("component_id", f"no step of {component_id} runs from checkpoint {checkpoint_id}")
    if not found:
        raise ForkError("checkpoint_id", f"checkpoint {checkpoint_id} runs no component of this session "
                                         "(take a step's checkpoint_id from the trace)")
    names = sorted({s["component_id"] for _, s in found})
    if len(names) > 1:
        raise ForkError("component_id", f"checkpoint {checkpoint_id} runs {', '.join(names)} in parallel: "
                                        "say which one with `component_id`")
    return found[-1]


async def fork_plan(graph, config: dict, checkpoint_id: str, *, inputs: dict | None = None,
                    outputs: dict | None = None, component_id: str | None = None) -> ForkPlan:
    """Check a fork request against the session's trace (every branch of it) and say how to run it.

    `inputs` edit what the step's component read (the keys of its traced `inputs`; a form's fields for
    UserFillUp and Begin); `outputs` replace its outputs (merged over the traced ones) and the run goes on
    from its successors. Raises `ForkError` naming the field at fault."""
    from canvas2graph.compiler.canvas import canvas_of
    if not isinstance(checkpoint_id, str) or not checkpoint_id:
        raise ForkError("checkpoint_id", "`checkpoint_id` must be a step's checkpoint id from the trace")
    if inputs is not None and outputs is not None:
        raise ForkError("outputs", "give `inputs` (the step runs again with them) or `outputs` (they replace the "
                                   "step's), not both")
    thread = _thread_config(config)
    canvas = canvas_of(graph)
    # the branch up to the checkpoint: its last turn holds the steps that ran from it (on whichever branch)
    chain, history = await _lineage(graph, {**thread, "configurable": {**thread["configurable"],
                                                                        "checkpoint_id": checkpoint_id}})
    turns = _build(canvas, chain, history)
    snapshot = chain[-1]
    builder = _Builder(canvas)
    pending = {"turn": 0, "query": "", "steps": []}
    for task in snapshot.tasks:     # tasks not run yet (the newest checkpoint of a stopped turn)
        node = builder.node(task.name)
        if node is not None and task.name != FINISH and task.result is None and task.error is None:
            pending["steps"].append({"checkpoint_id": checkpoint_id, "component_id": node.id, "inputs": {},
                                     "outputs": {}})
    forked, step = _step_at(turns + [pending], checkpoint_id, component_id)
    query = next((t["query"] for t in reversed(turns) if t["query"]), "")
    node = canvas.plan.nodes[step["component_id"]]
    plan = ForkPlan(config=snapshot.config, component_id=node.id, component_type=node.component_type, query=query,
                    forks=forked.get("message_id") or None)
    if node.component_type in FORMS:
        if outputs is not None:
            raise ForkError("outputs", f"{node.id} is a form ({node.component_type}): fork it with `inputs`, its answers")
        if node.component_type == "Begin" and inputs:
            raise ForkError("inputs", f"{node.id} starts the turn: run a new turn with these inputs instead")
        if inputs is not None and node.component_type == "UserFillUp":
            declared = node.params.inputs if isinstance(node.params.inputs, dict) else {}
            unknown = [k for k in inputs if k not in declared]
            if unknown:
                raise ForkError("inputs", f"{node.id} has no form field {', '.join(map(repr, unknown))} "
                                          f"(its fields: {', '.join(declared) or 'none'})")
            plan.resume = dict(inputs)
        return plan
    if inputs is not None:
        if not isinstance(inputs, dict):
            raise ForkError("inputs", "`inputs` must be an object: {input name: value}")
        known = step.get("inputs") or {}
        unknown = [k for k in inputs if k not in known]
        if unknown:
            raise ForkError("inputs", f"{node.id} has no input {', '.join(map(repr, unknown))} "
                                      f"(its inputs: {', '.join(known) or 'none'})")
        plan.overrides[node.id] = {"inputs": dict(inputs)}
    elif outputs is not None:
        if not isinstance(outputs, dict):
            raise ForkError("outputs", "`outputs` must be an object: {output name: value}")
        merged = {k: v for k, v in (step.get("outputs") or {}).items()
                  if k not in ("_created_time", "_elapsed_time", "_ERROR") and not is_pending(v)}
        plan.overrides[node.id] = {"outputs": {**merged, **outputs}, "inputs": step.get("inputs") or {}}
    return plan
