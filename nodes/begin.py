"""Begin: the entry of every canvas; its outputs are the request's inputs (SPEC 3.1)."""
from __future__ import annotations

import asyncio
import json
from typing import Any, Mapping

from pydantic import field_validator

from canvas2graph.nodes.base import Node, Params, Result
from canvas2graph.nodes.registry import register
from canvas2graph.runtime.services.files import CONTENT, FileStoreError, is_file_entry, store_for
from canvas2graph.runtime.graph.state import GLOBALS, HISTORY, REQUEST, combine_updates, outputs_of, with_update
from canvas2graph.runtime.graph.turn import resume_update


class BeginParams(Params):
    mode: str = "conversational"
    prologue: str = "Hi! I'm your assistant. What can I do for you?"
    enable_tips: bool = True
    tips: str = "Please fill up the form"

    @field_validator("mode")
    @classmethod
    def _mode(cls, v: str) -> str:
        if v not in ("conversational", "task", "Webhook"):
            raise ValueError(f"mode must be one of conversational, task, Webhook (got {v!r})")
        return v

    @field_validator("inputs", mode="before")
    @classmethod
    def _inputs(cls, v: Any) -> Any:
        if v is None:
            return {}
        if not isinstance(v, dict):
            raise ValueError("inputs must be an object of form fields keyed by name")
        return v

    def form(self) -> dict[str, dict]:
        return {k: f for k, f in self.inputs.items() if isinstance(f, dict)}


def field_value(value: Any, declared: Mapping[str, Any] | None = None) -> Any:
    """A request input as RAGFlow stores it: `{type, value}` dicts unwrapped, object JSON parsed."""
    ftype = (declared or {}).get("type", "")
    if isinstance(value, dict) and "value" in value:
        ftype = value.get("type", ftype) or ftype
        value = value["value"]
    if ftype == "object" and isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            pass
    return value


# The request input that carries a webhook call to a Webhook-mode Begin (server/backend/webhook.py builds it):
# {"query": {...}, "headers": {...}, "body": {...}, "input": <the whole request>}. A name no form field takes.
WEBHOOK_INPUT = "__webhook__"


# LangGraph reads a dict resume value whose keys all look like interrupt ids as a map of answers by
# interrupt id, and `{}` qualifies: a form resumed with no inputs (every field optional) would be
# answered with nothing and ask again. canvas2graph's Runner therefore wraps the request's inputs,
# with the request's query beside them. A plain `Command(resume={field: value})` works too.
RESUME_KEY = "inputs"
RESUME_QUERY = "query"


def resume_value(inputs: Mapping[str, Any] | None, query: Any = "") -> dict[str, Any]:
    """The `Command(resume=...)` value that answers a paused form with a request's inputs and query."""
    value: dict[str, Any] = {RESUME_KEY: dict(inputs or {})}
    if query:
        value[RESUME_QUERY] = query
    return value


def read_answer(value: Any) -> tuple[dict[str, Any], Any]:
    """(the form's answers, the query that came with them) from a resumed `interrupt()`."""
    if (isinstance(value, dict) and RESUME_KEY in value and set(value) <= {RESUME_KEY, RESUME_QUERY}
            and isinstance(value[RESUME_KEY], dict)):
        return value[RESUME_KEY], value.get(RESUME_QUERY) or ""
    return (dict(value) if isinstance(value, dict) else {}), ""


def is_file_field(declared: Mapping[str, Any] | None, raw: Any = None) -> bool:
    """A form field of type file, as the form declares it or the request's `{type, value}` says."""
    given = raw.get("type", "") if isinstance(raw, dict) and "value" in raw else ""
    return "file" in str((declared or {}).get("type", "")).lower() or "file" in str(given).lower()


def _unread(value: Any) -> bool:
    items = value if isinstance(value, list) else [value]
    return any(is_file_entry(v) and CONTENT not in v for v in items)


async def read_files(values: dict[str, Any], files: dict[str, bool], ctx, component_id: str | None) -> dict[str, Any]:
    """`values` with each file field (`files`: the keys that are) as RAGFlow hands it on: a list of the
    uploaded files, each entry with its `content` (canvas2graph.runtime.services.file_text), read from the run's file store
    on behalf of the run's tenant. An empty optional field stays None."""
    from canvas2graph.runtime.services.file_text import with_contents
    extras = getattr(ctx, "extras", None) or {}
    out = dict(values)
    for key in files:
        value = out.get(key)
        if value is None or value == "":
            continue
        value = value if isinstance(value, list) else [value]
        if _unread(value):
            try:
                value = await asyncio.to_thread(with_contents, value, store_for(extras), extras.get("tenant"))
            except FileStoreError as e:
                raise FileStoreError(f"{key if component_id is None else f'{component_id}@{key}'}: {e}") from None
        out[key] = value
    return out


async def read_sys_files(state: Mapping[str, Any], ctx) -> dict[str, Any]:
    """The `sys.files` this turn brought, read (RAGFlow parses them at the start of the run), as a
    write of the globals; {} when there is nothing new to read."""
    files = (state.get(GLOBALS) or {}).get("sys.files")
    if not isinstance(files, list) or not _unread(files):
        return {}
    read = await read_files({"sys.files": files}, {"sys.files": True}, ctx, None)
    return {GLOBALS: {"sys.files": read["sys.files"]}}


def missing_fields(form: dict[str, dict], given: Mapping[str, Any]) -> list[str]:
    """Required fields a request did not fill (RAGFlow's _is_input_field_satisfied)."""
    missing = []
    for key, field in form.items():
        value = field_value(given.get(key), field) if key in given else None
        if "file" in str(field.get("type", "")):
            if not field.get("optional") and value in (None, [], ""):
                missing.append(key)
        elif value is None and not field.get("optional"):
            missing.append(key)
    return missing


def ask(form: dict[str, Any], state: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Pause the turn on `form` ({component_id, inputs, tips}) until a request answers it.

    Returns the answers and the writes that count each answering request as a turn of the
    conversation (SPEC 5.1): it happens here, in the resumed step, so a plain LangGraph
    `Command(resume=...)` keeps the conversation as canvas2graph's Runner does. An answer that leaves
    required fields empty is asked again for those fields (the Runner refuses such a request before
    resuming, as RAGFlow's server does; LangGraph's own calls get the form again).
    """
    from langgraph.types import interrupt
    fields = form.get("inputs") or {}
    answer: dict[str, Any] = {}
    writes: dict[str, Any] = {}
    while True:
        given, query = read_answer(interrupt(form))
        answer.update(given)
        writes = combine_updates(writes, resume_update(with_update(state, writes), query=query, inputs=given))
        missing = missing_fields(fields, answer)
        if not missing:
            return answer, writes
        form = {**form, "inputs": {k: fields[k] for k in missing}}


def _outputs_of(params: BeginParams) -> set[str] | None:
    if params.mode == "Webhook":       # webhook payload keys are only known at run time
        return None
    return set(params.form())


def answered_before(state: Mapping[str, Any]) -> bool:
    """Whether this is a later turn of the session (history holds an earlier user message, whether or not
    that turn finished): Begin asks for its form on the session's first turn only."""
    return sum(1 for h in state.get(HISTORY) or [] if isinstance(h, (list, tuple)) and h and h[0] == "user") > 1


@register("Begin", BeginParams, outputs=_outputs_of)
class Begin(Node):
    async def run(self, state, ctx) -> Result:
        request = state.get(REQUEST) or {}
        given = request.get("inputs") or {}
        if self.params.mode == "Webhook" and isinstance(given.get(WEBHOOK_INPUT), dict):
            # RAGFlow sets each part of the webhook payload as an output, and the request as input `request`
            payload = given[WEBHOOK_INPUT]
            outputs = {k: v for k, v in payload.items() if k != "input"}
            return Result(outputs=outputs, inputs={"request": payload.get("input")})
        form = self.params.form()
        files = {k: True for k, f in form.items() if is_file_field(f)}
        values: dict[str, Any] = {}
        if given:
            for key, raw in given.items():
                values[key] = field_value(raw, form.get(key))
                if is_file_field(form.get(key), raw):
                    files[key] = True
        elif form:
            query = (state.get(GLOBALS) or {}).get("sys.query")
            if isinstance(query, dict):
                values = {k: field_value(v, form.get(k)) for k, v in query.items() if k in form}
            elif query and len(form) == 1:
                values = {next(iter(form)): query}
        writes = await read_sys_files(state, ctx)
        missing = [k for k, f in form.items() if not f.get("optional") and values.get(k) in (None, "")]
        if missing and self.params.mode != "Webhook" and not answered_before(state):
            # A first turn without the form's required fields pauses like a UserFillUp would; a later turn
            # runs with what it was sent, the other fields None, as in RAGFlow (its form is not sent again)
            answer, resumed = ask({"component_id": self.id, "tips": self.params.tips,
                                   "inputs": {k: {**form[k], "value": None} for k in missing}}, state)
            values.update({k: field_value(v, form.get(k)) for k, v in answer.items()})
            files.update({k: True for k, v in answer.items() if is_file_field(form.get(k), v)})
            writes = combine_updates(resumed, writes)
        values = await read_files(values, files, ctx, self.id)
        # the fields an earlier turn of the session set, None when this turn does not (RAGFlow's reset keeps
        # an output's key; compiler/build.py hands them on)
        values = {**{k: None for k in outputs_of(state, self.id) if not str(k).startswith("_")}, **values}
        return Result(outputs=dict(values), inputs=dict(values), writes=writes)
