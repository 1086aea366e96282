"""The graph state: JSON values only, so every checkpointer can store it.

`outputs` maps component id -> that component's outputs; a node's update names only the
components it writes and the reducer merges them key by key. (One LangGraph channel per
component was measured: LangGraph scans every channel at every step, which cost 11% per turn on
a 50-component canvas.) Other channels hold the globals (`sys.*`, `env.*`), the conversation
history, the request of the current turn and the last component that ran.

The outputs, loops, last component, globals and history are stored as each step's writes (LangGraph
`DeltaChannel`s, runtime/graph/delta.py): a step stores what it adds. A list that grows (the history,
`sys.history`, an Iteration's collected outputs) takes `appended` writes, so a turn or a pass stores its new
entries, not the list again.

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


# the output keys RAGFlow's reset at a turn's start does not carry over as None: what every step writes afresh,
# and the failure RAGFlow keeps into the next turn (a documented bug canvas2graph does not copy)
NOT_KEPT = frozenset({"_created_time", "_elapsed_time", "_ERROR"})


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


APPEND = "__append__"
DROP = "__drop__"


def appended(items: list, drop: int = 0) -> dict[str, Any]:
    """A write that adds to a list instead of replacing it: `drop` trailing entries go, then `items` are
    appended. The history channel and the list values of the globals (`sys.history`) take these, so a
    turn stores what it adds, not the whole conversation again (docs/performance.md, Storage). A plain
    list written to them replaces the value, as before (`update_state({"history": [...]})`)."""
    return {APPEND: list(items), DROP: drop} if drop else {APPEND: list(items)}


def is_appended(value: Any) -> bool:
    return isinstance(value, dict) and APPEND in value and set(value) <= {APPEND, DROP}


def list_change(old: Any, new: list) -> Any:
    """The write that turns list `old` into list `new`: `appended` when they share a prefix, else `new`."""
    if not isinstance(old, list) or not old:
        return list(new)
    common = 0
    for a, b in zip(old, new):
        if a is not b and a != b:
            break
        common += 1
    if common == 0:
        return list(new)
    return appended(new[common:], len(old) - common)


def add_to_list(old: Any, new: Any) -> Any:
    """`new` written over `old`: an `appended` write applies to `old`'s list (to another `appended`
    write, it composes: both are updates); anything else replaces it."""
    if not is_appended(new):
        return new
    drop, items = int(new.get(DROP) or 0), new[APPEND]
    if is_appended(old):
        kept = old[APPEND][:max(0, len(old[APPEND]) - drop)]
        drop_before = int(old.get(DROP) or 0) + max(0, drop - len(old[APPEND]))
        return appended(kept + list(items), drop_before)
    base = list(old) if isinstance(old, (list, tuple)) else []
    return (base[:len(base) - drop] if drop else base) + list(items)


def resolved(value: Any) -> Any:
    """A value with no `appended` write left in it (one that found no list applies to an empty one)."""
    return add_to_list([], value) if is_appended(value) else value


def merge_globals(old: dict | None, new: dict | None) -> dict:
    """Globals merged key by key; a key written with `appended` adds to its list (to the key's own
    `appended` write when `old` is an update too)."""
    if not old:
        return dict(new or {})
    merged = dict(old)
    for key, value in (new or {}).items():
        merged[key] = add_to_list(merged.get(key), value) if is_appended(value) and key in merged else value
    return merged


def reduce_globals(value: dict, writes: list) -> dict:
    """The globals channel's reducer (a `DeltaChannel`'s: the value and a batch of writes, in order).
    Lists are copied once per batch, so replaying many appends costs what they add."""
    out, owned = dict(value or {}), set()
    for write in writes:
        for key, item in (overwritten(write) or {}).items():
            if is_appended(item):
                if key not in owned:
                    out[key] = list(out[key]) if isinstance(out.get(key), (list, tuple)) else []
                    owned.add(key)
                _extend(out[key], item)
            else:
                out[key] = item
                owned.discard(key)
    return out


def reduce_history(value: list, writes: list) -> list:
    """The history channel's reducer: `appended` writes add entries, a list replaces the history."""
    out, owned = value, False
    for write in writes:
        write = overwritten(write)
        if is_appended(write):
            if not owned:
                out, owned = (list(out) if isinstance(out, (list, tuple)) else []), True
            _extend(out, write)
        else:
            out, owned = write, False
    return out


def _extend(items: list, write: dict) -> None:
    drop = int(write.get(DROP) or 0)
    if drop:
        del items[max(0, len(items) - drop):]
    items.extend(write[APPEND])


def with_update(state: Mapping[str, Any], update: Mapping[str, Any]) -> dict:
    """A shallow view of `state` with a turn-bookkeeping update applied to its history and globals as
    their channels would apply it (`appended` writes add); other keys of `update` replace the state's."""
    view = {**state, **update}
    if HISTORY in update:
        view[HISTORY] = resolved(add_to_list(state.get(HISTORY), update[HISTORY]))
    if GLOBALS in update:
        view[GLOBALS] = reduce_globals(dict(state.get(GLOBALS) or {}), [update[GLOBALS] or {}])
    return view


def combine_updates(first: Mapping[str, Any], then: Mapping[str, Any]) -> dict:
    """Two updates as one (`then` written after `first`): history and globals compose, other keys replace."""
    out = {**first, **then}
    if HISTORY in first and HISTORY in then:
        out[HISTORY] = add_to_list(first[HISTORY], then[HISTORY])
    if GLOBALS in first and GLOBALS in then:
        out[GLOBALS] = merge_globals(first[GLOBALS] or {}, then[GLOBALS] or {})
    return out


def merge_values(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> dict:
    """One component's outputs with `new` written over `old`, key by key: a key written with `appended`
    adds to its list (an Iteration's collected outputs), any other value replaces the key's."""
    merged = dict(old or {})
    for key, value in new.items():
        merged[key] = add_to_list(merged[key], value) if is_appended(value) and key in merged else value
    return merged


def merge_outputs(old: dict | None, new: dict | None) -> dict:
    """Merge per component and key (`merge_values`); `None` resets everything (done at the start of every
    turn). Merging two updates composes them: an `appended` write over another stays one."""
    if new is None:
        return {}
    merged = dict(old or {})
    for cid, values in new.items():
        prev = merged.get(cid)
        merged[cid] = merge_values(prev, values) if prev else dict(values)
    return merged


def reduce_outputs(value: dict, writes: list) -> dict:
    """The outputs' (and the loops') channel reducer: a batch of writes merged as `merge_outputs` merges them,
    each component's dict and each appended list copied once per batch, so a pass of an Iteration that adds
    one collected item costs that item, not the list again."""
    out, owned_cids, owned_lists = value, set(), set()
    for write in writes:
        write = overwritten(write)
        if write is None:
            out, owned_cids, owned_lists = {}, set(), set()
            continue
        if not owned_cids and out is value:
            out = dict(value or {})
        for cid, values in write.items():
            if cid not in owned_cids:
                out[cid] = dict(out.get(cid) or {})
                owned_cids.add(cid)
            target = out[cid]
            for key, item in values.items():
                if is_appended(item):
                    if (cid, key) not in owned_lists:
                        prev = target.get(key)
                        target[key] = list(prev) if isinstance(prev, (list, tuple)) else []
                        owned_lists.add((cid, key))
                    _extend(target[key], item)
                else:
                    target[key] = item
                    owned_lists.discard((cid, key))
    return out


def merge_reference(old: dict | None, new: dict | None) -> dict:
    """The turn's reference store: chunks and doc_aggs gathered from every retrieval; None resets it."""
    if new is None:
        return {"chunks": {}, "doc_aggs": {}}
    old = old or {"chunks": {}, "doc_aggs": {}}
    return {"chunks": {**old.get("chunks", {}), **new.get("chunks", {})},
            "doc_aggs": {**old.get("doc_aggs", {}), **new.get("doc_aggs", {})}}


def take_last(old: Any, new: Any) -> Any:
    return new


def reduce_last(value: Any, writes: list) -> Any:
    """LAST's channel reducer (a `DeltaChannel`'s: a batch of writes folded with `take_last_in_path`)."""
    for write in writes:
        value = take_last_in_path(value, overwritten(write))
    return value


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
SNAPSHOT_EVERY = 20      # updates of the history and of the globals between two stored whole values (10 turns)


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
    from langgraph.channels.delta import DeltaChannel

    from canvas2graph.runtime.graph.delta import GrowingDeltaChannel
    request = {} if components_view else {key: Annotated[kind, EphemeralValue(kind)] for key, kind in
                                          ((QUERY, Any), (INPUTS, dict), (FILES, list), (USER_ID, str))}
    fields: dict[str, Any] = {
        # stored as the writes of each step, with the whole value as often as its size pays for
        # (runtime/graph/delta.py): a pass of an Iteration stores what it adds, not the turn's outputs again
        OUTPUTS: Annotated[dict, GrowingDeltaChannel(reduce_outputs, dict, snapshot_frequency=SNAPSHOT_EVERY)],
        # container id -> its progress ({"idx", "items", "next", "done"}); persisted, so a pause or a
        # restart inside an Iteration or Loop resumes at the same pass (RAGFlow keeps it in memory)
        LOOPS: Annotated[dict, GrowingDeltaChannel(reduce_outputs, dict, snapshot_frequency=SNAPSHOT_EVERY)],
        # stored as the writes that changed them (LangGraph's DeltaChannel), with the whole value every
        # SNAPSHOT_EVERY updates: a turn stores the two history entries it adds, not the conversation
        GLOBALS: Annotated[dict, DeltaChannel(reduce_globals, dict, snapshot_frequency=SNAPSHOT_EVERY)],
        HISTORY: Annotated[list, DeltaChannel(reduce_history, list, snapshot_frequency=SNAPSHOT_EVERY)],
        REQUEST: Annotated[dict, take_last],
        # {"component_id", "inputs", "rank", "calls"} of the last to finish: written at every step, stored as writes
        LAST: Annotated[dict, GrowingDeltaChannel(reduce_last, dict, snapshot_frequency=SNAPSHOT_EVERY)],
        REFERENCE: Annotated[dict, merge_reference],
        **({} if components_view else {ANSWER: Annotated[str, take_last]}),   # the turn's answer ("" until it ends)
        **request,
    }
    return TypedDict(name, fields, total=False)  # type: ignore[operator]
