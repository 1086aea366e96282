"""The graph state: JSON values only, so every checkpointer can store it.

`outputs` maps component id -> that component's outputs; a node's update names only the
components it writes and the reducer merges them key by key. (One LangGraph channel per
component was measured: LangGraph scans every channel at every step, which cost 11% per turn on
a 50-component canvas.) Other channels hold the globals (`sys.*`, `env.*`), the conversation
history, the request of the current turn and the last component that ran.

Nodes address other components' outputs in `Result.writes` with `channel(component_id)` keys;
`Node.__call__` folds them into the `outputs` update.

The graph's public face (what `invoke`, LangGraph Server and Studio show) is smaller than its state:
`CanvasInput` (a turn's request: `query`, `inputs`, `files`, `user_id`) and `CanvasOutput` (the
`answer` and every component's `outputs`). The request's keys are ephemeral channels: they hold a
request only until the step that reads it (Begin's, which starts the turn) has run, so a turn never
sees the request of an earlier one.
"""
from __future__ import annotations

from typing import Annotated, Any, Mapping

from typing_extensions import TypedDict   # pydantic (LangGraph Server, Studio) reads its JSON schema

OUTPUTS = "outputs"
LOOPS = "loops"
GLOBALS = "globals"
HISTORY = "history"
REQUEST = "request"
LAST = "last"
REFERENCE = "reference"
ANSWER = "answer"

# the request of a turn (CanvasInput), read by the step that starts the turn
QUERY = "query"
INPUTS = "inputs"
FILES = "files"
USER_ID = "user_id"
REQUEST_KEYS = (QUERY, INPUTS, FILES, USER_ID)


class CanvasInput(TypedDict, total=False):
    """What starts a turn: `graph.invoke({"query": "..."}, config)`.

    - `query`: the user's message (`sys.query`); an empty query keeps the previous one, as RAGFlow does;
    - `inputs`: values for the Begin form, `{field: value}` or RAGFlow's `{field: {"type", "value"}}`;
    - `files`: `sys.files`;
    - `user_id`: `sys.user_id`.
    """

    query: str
    inputs: dict[str, Any]
    files: list
    user_id: str


class CanvasOutput(TypedDict, total=False):
    """What a turn returns: the text of the answer and every component's outputs, by component id."""

    answer: str
    outputs: dict[str, dict[str, Any]]


OUT_PREFIX = "out:"


def channel(component_id: str) -> str:
    """How a node's `Result.writes` names another component's outputs."""
    return OUT_PREFIX + component_id


def outputs_of(state: Mapping[str, Any], component_id: str) -> dict:
    return (state.get(OUTPUTS) or {}).get(component_id) or {}


def with_outputs(state: Mapping[str, Any], component_id: str, values: Mapping[str, Any]) -> dict:
    """A shallow view of `state` where `component_id`'s outputs are updated (not written back)."""
    outputs = dict(state.get(OUTPUTS) or {})
    outputs[component_id] = {**(outputs.get(component_id) or {}), **values}
    return {**state, OUTPUTS: outputs}


def with_inputs(state: Mapping[str, Any], edits: Mapping[str, Any]) -> dict:
    """A shallow view of `state` where the references a component reads have the given values: `sys.x` and
    `env.x` (globals), `Cpn:Id@key` and `Cpn:Id@key.path` (outputs). What a fork runs a component with when
    its inputs are edited (runtime/run/steps.py); the keys are the ones the component reports as its inputs."""
    view = dict(state)
    globals_ = None
    for key, value in edits.items():
        if "@" in key:
            cid, _, path = key.partition("@")
            name, *rest = path.split(".")
            if rest:
                value = _set_path(outputs_of(view, cid).get(name), rest, value)
            view = with_outputs(view, cid, {name: value})
        else:
            if globals_ is None:
                globals_ = view[GLOBALS] = dict(view.get(GLOBALS) or {})
            globals_[key] = value
    return view


def _set_path(container: Any, path: list[str], value: Any) -> Any:
    """`container` with `value` at `path` (dict keys or list indexes), copied along the path only."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(container, list) and head.lstrip("-").isdigit() and -len(container) <= int(head) < len(container):
        copy = list(container)
        copy[int(head)] = _set_path(copy[int(head)], rest, value)
        return copy
    copy = dict(container) if isinstance(container, Mapping) else {}
    copy[head] = _set_path(copy.get(head), rest, value)
    return copy


def merge_outputs(old: dict | None, new: dict | None) -> dict:
    """Merge per component and key; `None` resets everything (done at the start of every turn)."""
    if new is None:
        return {}
    merged = dict(old or {})
    for cid, values in new.items():
        prev = merged.get(cid)
        merged[cid] = {**prev, **values} if prev else dict(values)
    return merged


def merge_globals(old: dict | None, new: dict | None) -> dict:
    if not old:
        return dict(new or {})
    return {**old, **(new or {})}


def merge_reference(old: dict | None, new: dict | None) -> dict:
    """The turn's reference store: chunks and doc_aggs gathered from every retrieval; None resets it."""
    if new is None:
        return {"chunks": {}, "doc_aggs": {}}
    old = old or {"chunks": {}, "doc_aggs": {}}
    return {"chunks": {**old.get("chunks", {}), **new.get("chunks", {})},
            "doc_aggs": {**old.get("doc_aggs", {}), **new.get("doc_aggs", {})}}


def take_last(old: Any, new: Any) -> Any:
    return new


def take_last_in_path(old: Any, new: Any) -> Any:
    """LAST: the component that finished last. LangGraph applies the writes of one step in its task order
    (node names sorted); RAGFlow's last is the last of the step in path order, so of two writes stamped
    with the same step (`rank`: [step, path rank], nodes.base) the one later in path order stays."""
    if isinstance(old, dict) and isinstance(new, dict):
        a, b = old.get("rank"), new.get("rank")
        if a and b and a[0] == b[0] and a[1] > b[1]:
            return old
    return new


OVERWRITE = "__overwrite__"


def overwrite(value: Any) -> dict[str, Any]:
    """A write that replaces a reduced channel's value instead of merging into it: LangGraph's `Overwrite`
    in its JSON form, which checkpoints store as a plain dict (the dataclass takes the serializer's slow path)."""
    return {OVERWRITE: value}


def overwritten(value: Any) -> Any:
    """The value a write sets, whether it overwrites (`overwrite()` or LangGraph's `Overwrite`) or not."""
    if isinstance(value, dict):
        return value[OVERWRITE] if len(value) == 1 and OVERWRITE in value else value
    return getattr(value, "value", value) if type(value).__name__ == "Overwrite" else value


def build_state_schema(name: str = "CanvasState", *, components_view: bool = False) -> type:
    """The graph's state. `components_view`: the part components read, without the request channels
    and the answer (Begin's step reads the request; nothing reads the answer), which LangGraph then
    need not look at in every task."""
    from langgraph.channels import EphemeralValue   # here: `canvas2graph compile` never builds a state
    request = {} if components_view else {key: Annotated[kind, EphemeralValue(kind)] for key, kind in
                                          ((QUERY, Any), (INPUTS, dict), (FILES, list), (USER_ID, str))}
    fields: dict[str, Any] = {
        OUTPUTS: Annotated[dict, merge_outputs],
        # container id -> its progress ({"idx", "items", "next", "done"}); persisted, so a pause or a
        # restart inside an Iteration or Loop resumes at the same pass (RAGFlow keeps it in memory)
        LOOPS: Annotated[dict, merge_outputs],
        GLOBALS: Annotated[dict, merge_globals],
        HISTORY: Annotated[list, take_last],
        REQUEST: Annotated[dict, take_last],
        LAST: Annotated[dict, take_last_in_path],    # {"component_id", "inputs", "rank"} of the last to finish
        REFERENCE: Annotated[dict, merge_reference],
        **({} if components_view else {ANSWER: Annotated[str, take_last]}),   # the turn's answer ("" until it ends)
        **request,
    }
    return TypedDict(name, fields, total=False)  # type: ignore[operator]
