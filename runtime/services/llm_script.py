"""The ``--llm-script`` file: the replies the scripted models of one run give, parsed and checked.

A script (see ``shared/parity/README.md``) lists replies in call order, per component (`by_component`),
or chosen by the message a model is given (`by_message`), with scripted retrieval chunks and tool
results. Users test their agents offline with it, so a malformed script fails early with a
:class:`ScriptError` that says what is wrong and where. :class:`Script` is the parsed file and the
run's shared queues; `runtime/services/scripted.py` is the chat model that answers from it.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from canvas2graph.text import scrub

DEFAULT_STREAM_CHUNKS = 3
# RAGFlow's recorded traces report this score for scripted chunks that name none.
DEFAULT_SIMILARITY = 0.9

_SCRIPT_KEYS = {"replies", "by_component", "retrieval", "tool_results", "auto_reply", "stream_chunks",
                "chunk_interval_ms", "delay_ms"}
_REPLY_KEYS = {"content", "reasoning", "chunks", "tool_calls", "error", "delay_ms"}
MAX_DELAY_MS = 60_000


class ScriptError(Exception):
    """The script file or one of its values has the wrong shape."""


class ScriptExhausted(ScriptError):
    """A model was called after its queues ran dry and the script has no ``auto_reply``."""


@dataclass
class Reply:
    """One scripted model answer."""

    content: str = ""
    reasoning: str | None = None
    chunks: list[str] | None = None  # explicit stream pieces, overriding the word split
    tool_calls: list[dict] = field(default_factory=list)  # [{"name", "arguments": dict}]
    error: str | None = None
    delay: float | None = None               # seconds before the first output; None: the script's delay_ms
    chunk_delays: list[float] | None = None  # seconds before each of `chunks` (objects with a delay_ms)


def _delay_seconds(raw: Any, where: str) -> float:
    """A `delay_ms` value as seconds: a number of milliseconds from 0 to 60000."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not 0 <= raw <= MAX_DELAY_MS:
        raise ScriptError(f"{where} must be a number of milliseconds from 0 to {MAX_DELAY_MS}, got {raw!r}")
    return raw / 1000


def _paced_chunks(raw: Any, where: str) -> tuple[list[str] | None, list[float] | None]:
    """A reply's `chunks`: strings, or `{"content", "delay_ms"}` objects whose delay is waited before that
    chunk is streamed. Returns the texts and, when any chunk names a delay, the delay of each."""
    if raw is None:
        return None, None
    if not isinstance(raw, list):
        raise ScriptError(f"{where} must be a list of strings or {{\"content\", \"delay_ms\"}} objects")
    texts, delays = [], []
    for i, chunk in enumerate(raw):
        if isinstance(chunk, str):
            texts.append(chunk)
            delays.append(0.0)
            continue
        if not isinstance(chunk, dict) or not isinstance(chunk.get("content", ""), str) \
                or set(chunk) - {"content", "delay_ms"}:
            raise ScriptError(f'{where}[{i}] must be a string or an object with "content" and "delay_ms"')
        texts.append(chunk.get("content", ""))
        delays.append(_delay_seconds(chunk.get("delay_ms", 0), f"{where}[{i}].delay_ms"))
    return texts, (delays if any(delays) else None)


def tool_call_arguments(arguments: Any, where: str) -> dict:
    """Tool-call arguments as a dict; providers send JSON strings, scripts usually objects."""
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise ScriptError(f"{where}: arguments is not valid JSON: {exc}") from None
    if not isinstance(arguments, dict):
        raise ScriptError(f"{where}: arguments must be an object, got {type(arguments).__name__}")
    return arguments


def _optional_str(value: Any, where: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ScriptError(f"{where} must be a string, got {type(value).__name__}")
    return value


def _parse_reply(raw: Any, where: str) -> Reply:
    """A reply is a plain string (its content) or an object with the keys of :class:`Reply`."""
    if isinstance(raw, str):
        return Reply(content=raw)
    if not isinstance(raw, dict):
        raise ScriptError(f"{where}: a reply must be a string or an object, got {type(raw).__name__}")
    unknown = set(raw) - _REPLY_KEYS
    if unknown:
        raise ScriptError(f"{where}: unknown reply key(s) {sorted(unknown)}; allowed: {sorted(_REPLY_KEYS)}")
    chunks, chunk_delays = _paced_chunks(raw.get("chunks"), f"{where}.chunks")
    calls = raw.get("tool_calls") or []
    if not isinstance(calls, list):
        raise ScriptError(f"{where}.tool_calls must be a list")
    tool_calls = []
    for i, call in enumerate(calls):
        call_where = f"{where}.tool_calls[{i}]"
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not call["name"]:
            raise ScriptError(f'{call_where} must be an object with a "name" string')
        tool_calls.append({**call, "arguments": tool_call_arguments(call.get("arguments"), call_where)})
    return Reply(
        content=_optional_str(raw.get("content"), f"{where}.content") or "",
        reasoning=_optional_str(raw.get("reasoning"), f"{where}.reasoning"),
        chunks=chunks,
        tool_calls=tool_calls,
        error=_optional_str(raw.get("error"), f"{where}.error"),
        delay=_delay_seconds(raw["delay_ms"], f"{where}.delay_ms") if "delay_ms" in raw else None,
        chunk_delays=chunk_delays,
    )


def _parse_replies(raw: Any, where: str) -> list[Reply]:
    if not isinstance(raw, list):
        raise ScriptError(f"{where} must be a list of replies, got {type(raw).__name__}")
    return [_parse_reply(r, f"{where}[{i}]") for i, r in enumerate(raw)]


def _parse_chunk(raw: Any, where: str) -> dict:
    """Retrieval chunks get the keys every consumer reads; extra keys are kept."""
    if isinstance(raw, str):
        raw = {"content": raw}
    if not isinstance(raw, dict):
        raise ScriptError(f"{where}: a retrieval chunk must be a string or an object")
    if not isinstance(raw.get("content", ""), str):
        raise ScriptError(f"{where}.content must be a string")
    return {"content": "", "docnm_kwd": "", "doc_id": "", "similarity": DEFAULT_SIMILARITY, **raw}


def _parse_tool_result(raw: Any, where: str) -> dict:
    """A string is both the tool's ``formalized_content`` and what the model sees."""
    if isinstance(raw, str):
        return {"outputs": {"formalized_content": raw}, "return": raw}
    if not isinstance(raw, dict) or not ({"outputs", "return"} & set(raw)):
        raise ScriptError(f'{where}: a tool result must be a string or an object with "outputs"/"return"')
    outputs = raw.get("outputs")
    ret = raw.get("return")
    if outputs is None:
        outputs = {"formalized_content": ret if isinstance(ret, str) else json.dumps(ret, ensure_ascii=False)}
    if not isinstance(outputs, dict):
        raise ScriptError(f"{where}.outputs must be an object")
    if "return" not in raw:
        ret = outputs.get("formalized_content", "")
    return {**raw, "outputs": outputs, "return": ret}


def _str_keyed(raw: Any, where: str) -> dict:
    if not isinstance(raw, dict):
        raise ScriptError(f"{where} must be an object, got {type(raw).__name__}")
    return raw


# -- replies chosen by the message a model is given ------------------------------------------------
_SCRIPT_KEYS.add("by_message")
_RULE_KEYS = {"match", "component", "reply"}


@dataclass
class MessageRule:
    """`{"match": REGEX, "component": ID, "reply": REPLY}`: a call whose message matches answers `reply`.

    The message is the text of the last user message the model is given (for a Categorize, the user's
    question; for an LLM or Agent, its last user prompt). Rules are tried in order and are never used
    up, so one script answers any number of questions the way a model would: by what is asked.
    """

    match: re.Pattern
    reply: Reply
    component: str | None = None       # only calls made by this component; any caller when absent

    def applies(self, component_id: str | None, message: str) -> bool:
        return (self.component is None or self.component == component_id) and bool(self.match.search(message))


def _parse_rules(raw: Any, where: str) -> list[MessageRule]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ScriptError(f"{where} must be a list of rules, got {type(raw).__name__}")
    return [_parse_rule(rule, f"{where}[{i}]") for i, rule in enumerate(raw)]


def _parse_rule(raw: Any, where: str) -> MessageRule:
    if not isinstance(raw, dict) or "reply" not in raw or not isinstance(raw.get("match"), str):
        raise ScriptError(f'{where} must be an object with "match" (a regular expression) and "reply"')
    unknown = set(raw) - _RULE_KEYS
    if unknown:
        raise ScriptError(f"{where}: unknown rule key(s) {sorted(unknown)}; allowed: {sorted(_RULE_KEYS)}")
    try:
        pattern = re.compile(raw["match"], re.IGNORECASE)
    except re.error as exc:
        raise ScriptError(f"{where}.match is not a valid regular expression: {exc}") from None
    return MessageRule(match=pattern, reply=_parse_reply(raw["reply"], f"{where}.reply"),
                       component=_optional_str(raw.get("component"), f"{where}.component"))


@dataclass
class Script:
    """Shared, mutable state of one script: queues are consumed in call order across all models of a run."""

    replies: list[Reply] = field(default_factory=list)
    by_component: dict[str, list[Reply]] = field(default_factory=dict)
    by_message: list[MessageRule] = field(default_factory=list)   # replies chosen by the message, never used up
    retrieval: list[dict] | None = None     # None: the script says nothing, retrievals run for real
    tool_results: dict[str, list[dict]] = field(default_factory=dict)
    auto_reply: str | None = None
    stream_chunks: int = DEFAULT_STREAM_CHUNKS
    chunk_interval: float = 0.0  # seconds before each streamed chunk: a model that takes time to write
    delay: float = 0.0           # seconds every reply waits before its first output (a reply's delay_ms overrides)
    calls: int = 0
    # every request a scripted model received, in order: {component_id, messages, tools}; tests
    # and users read it to see exactly what a canvas sent (prompts, tool results, citation rules)
    requests: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        # Sync callers may run on executor threads, so pops and the counter are guarded.
        # (A plain attribute, not a field: the model's pydantic schema never sees it.)
        self._lock = threading.Lock()

    @classmethod
    def load(cls, source: str | os.PathLike | list | dict | Script) -> Script:
        """Build a script from a JSON file path or the already-parsed JSON (a list means replies)."""
        if isinstance(source, Script):
            return source
        if isinstance(source, (str, os.PathLike)):
            path = Path(source)
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except OSError as exc:
                raise ScriptError(f"cannot read script file {path}: {exc.strerror or exc}") from None
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise ScriptError(f"script file {path} is not valid JSON: {exc}") from None
            try:
                return cls.load(data)
            except ScriptError as exc:
                raise type(exc)(f"script file {path}: {exc}") from None
        source = scrub(source)        # a reply must be text a client can read: no lone surrogates
        if isinstance(source, list):
            return cls(replies=_parse_replies(source, "replies"))
        if not isinstance(source, dict):
            raise ScriptError(f"a script must be a list of replies or an object, got {type(source).__name__}")

        unknown = set(source) - _SCRIPT_KEYS
        if unknown:
            raise ScriptError(f"unknown script key(s) {sorted(unknown)}; allowed: {sorted(_SCRIPT_KEYS)}")
        stream_chunks = source.get("stream_chunks", DEFAULT_STREAM_CHUNKS)
        if isinstance(stream_chunks, bool) or not isinstance(stream_chunks, int) or stream_chunks < 1:
            raise ScriptError(f"stream_chunks must be a positive integer, got {stream_chunks!r}")
        interval = source.get("chunk_interval_ms", 0)
        if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not 0 <= interval <= 60_000:
            raise ScriptError(f"chunk_interval_ms must be a number of milliseconds from 0 to 60000, got {interval!r}")
        retrieval = source.get("retrieval")
        if retrieval is not None and not isinstance(retrieval, list):
            raise ScriptError("retrieval must be a list of chunks")
        tool_results: dict[str, list[dict]] = {}
        for key, entries in _str_keyed(source.get("tool_results") or {}, "tool_results").items():
            if not isinstance(entries, list):
                raise ScriptError(f"tool_results[{key!r}] must be a list of results")
            tool_results[key] = [_parse_tool_result(e, f"tool_results[{key!r}][{i}]") for i, e in enumerate(entries)]
        return cls(
            replies=_parse_replies(source.get("replies") or [], "replies"),
            by_component={
                cid: _parse_replies(queue, f"by_component[{cid!r}]")
                for cid, queue in _str_keyed(source.get("by_component") or {}, "by_component").items()
            },
            retrieval=None if retrieval is None else [_parse_chunk(c, f"retrieval[{i}]") for i, c in enumerate(retrieval)],
            tool_results=tool_results,
            by_message=_parse_rules(source.get("by_message"), "by_message"),
            auto_reply=_optional_str(source.get("auto_reply"), "auto_reply"),
            stream_chunks=stream_chunks,
            chunk_interval=interval / 1000,
            delay=_delay_seconds(source.get("delay_ms", 0), "delay_ms"),
        )

    def next_reply(self, component_id: str | None) -> Reply:
        """The caller's own queue first, then the shared one, then ``auto_reply``."""
        with self._lock:
            self.calls += 1
            own = self.by_component.get(component_id) if component_id is not None else None
            queue = own or self.replies
            if queue:
                reply = queue.pop(0)
                # Ids are fixed here, under the lock, so concurrent callers never share one.
                reply.tool_calls = [
                    {**call, "id": call.get("id") or f"call_{self.calls}_{i}"}
                    for i, call in enumerate(reply.tool_calls)
                ]
                return reply
            if self.auto_reply is not None:
                # str.replace, not str.format: reply text may contain other braces.
                text = self.auto_reply.replace("{n}", str(self.calls)).replace("{component}", component_id or "")
                return Reply(content=text)
        who = f"component {component_id!r}" if component_id else "an unnamed caller"
        raise ScriptExhausted(
            f"script exhausted: no reply left for {who} (model call {self.calls}); "
            "add replies, by_component entries or an auto_reply"
        )

    def reply_for(self, component_id: str | None, message: str) -> Reply:
        """The first `by_message` rule that matches the caller and its message, else :meth:`next_reply`."""
        rule = next((r for r in self.by_message if r.applies(component_id, message)), None)
        if rule is None:
            return self.next_reply(component_id)
        with self._lock:
            self.calls += 1
            # a copy, since the rule answers again; tool call ids as next_reply gives them
            return replace(rule.reply, tool_calls=[{**call, "id": call.get("id") or f"call_{self.calls}_{i}"}
                                                   for i, call in enumerate(rule.reply.tool_calls)])

    def next_tool_result(
        self, *, component_name: str, function_name: str | None = None, component_id: str | None = None
    ) -> dict | None:
        """The next scripted result for a tool execution, or None to run the tool for real.

        The most specific key with entries left wins: component id, then function name, then
        component name.
        """
        with self._lock:
            for key in (component_id, function_name, component_name):
                queue = self.tool_results.get(key) if key is not None else None
                if queue:
                    return queue.pop(0)
        return None

    def split_stream(self, text: str) -> list[str]:
        """Split ``text`` on word boundaries into at most ``stream_chunks`` pieces that join back to it."""
        words = re.findall(r"\S+\s*", text)
        if not words:
            return [text] if text else []
        leading = text[: len(text) - len(text.lstrip())]
        words[0] = leading + words[0]
        size = math.ceil(len(words) / self.stream_chunks)
        return ["".join(words[i : i + size]) for i in range(0, len(words), size)]
