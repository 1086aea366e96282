"""A scripted LangChain chat model for offline runs and tests.

A *script* (the ``--llm-script`` file, see ``shared/parity/README.md``) lists the replies the
models of one run give, in call order. Users test their agents offline with it, so a malformed
script fails early with a :class:`ScriptError` that says what is wrong and where.

One :class:`Script` is shared by every :class:`ScriptedChatModel` of a run: its queues are the
run's single source of truth, consumed in call order whichever component calls. Its `by_message`
rules choose a reply by the message a model is given instead, and are never used up.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from canvas2graph.text import scrub
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool

__all__ = [
    "MessageRule",
    "Reply",
    "Script",
    "ScriptError",
    "ScriptExhausted",
    "ScriptedChatModel",
    "ScriptedProviderError",
]

DEFAULT_STREAM_CHUNKS = 3
# RAGFlow's recorded traces report this score for scripted chunks that name none.
DEFAULT_SIMILARITY = 0.9

_SCRIPT_KEYS = {"replies", "by_component", "retrieval", "tool_results", "auto_reply", "stream_chunks",
                "chunk_interval_ms", "delay_ms"}
_REPLY_KEYS = {"content", "reasoning", "chunks", "tool_calls", "error", "delay_ms"}
MAX_DELAY_MS = 60_000
PAUSE = "scripted_pause_s"     # a chunk's pause, between `_chunks` and `_paced`


class ScriptError(Exception):
    """The script file or one of its values has the wrong shape."""


class ScriptExhausted(ScriptError):
    """A model was called after its queues ran dry and the script has no ``auto_reply``."""


class ScriptedProviderError(Exception):
    """A scripted ``{"error": ...}`` reply: behaves like a failing LLM provider call."""


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


def _parse_arguments(arguments: Any, where: str) -> dict:
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
        tool_calls.append({**call, "arguments": _parse_arguments(call.get("arguments"), call_where)})
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


def _last_user_text(messages: list[BaseMessage]) -> str:
    """The message a by_message rule reads: the last user message's text ("" when there is none)."""
    return next((m.text for m in reversed(messages) if m.type == "human"), "")


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


def _recorded(message: BaseMessage) -> dict[str, Any]:
    """A request's message as `Script.requests` keeps it: role and text, the tool call it answers, and
    the URLs of its image parts (a multimodal message's `images`)."""
    out: dict[str, Any] = {"role": message.type, "content": message.text}
    if isinstance(message, ToolMessage):
        out["tool_call_id"] = message.tool_call_id
    if isinstance(message.content, list):
        images = [_image_url(block) for block in message.content
                  if isinstance(block, dict) and block.get("type") in ("image_url", "image")]
        if images:
            out["images"] = images
    return out


def _image_url(block: dict) -> str:
    """An image part's URL: OpenAI's `{"image_url": {"url"}}`, or LangChain's standard image block."""
    if block.get("type") == "image_url":
        url = block.get("image_url")
        return url.get("url", "") if isinstance(url, dict) else str(url or "")
    if block.get("url"):
        return str(block["url"])
    data = block.get("base64") or block.get("data") or ""
    return f"data:{block.get('mime_type', 'application/octet-stream')};base64,{data}" if data else ""


def _word_count(text: str) -> int:
    return len(text.split())


class ScriptedChatModel(BaseChatModel):
    """A chat model whose answers come from a :class:`Script` instead of a provider."""

    script: Script
    component_id: str | None = None  # which component is calling (selects its by_component queue)
    model_name: str = "scripted"

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name, "component_id": self.component_id}

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        """Accept any tools: the script decides which calls happen, so names are never checked."""
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    # -- shared helpers -------------------------------------------------------------------------
    def _take_reply(self, messages: list[BaseMessage], tools: Any = None) -> Reply:
        self.script.requests.append({
            "component_id": self.component_id,
            "messages": [_recorded(m) for m in messages],
            "tools": [t["function"]["name"] for t in tools or []],
        })
        reply = self.script.reply_for(self.component_id, _last_user_text(messages))
        if reply.error is not None:
            raise ScriptedProviderError(reply.error)
        return reply

    def _tool_calls(self, reply: Reply) -> list[dict]:
        """LangChain tool calls; ids (``call_<model call>_<index>``) come from :meth:`Script.next_reply`."""
        return [
            {
                "name": call["name"],
                "args": _parse_arguments(call.get("arguments"), f"tool call {call['name']!r}"),
                "id": call.get("id") or f"call_{i}",
                "type": "tool_call",
            }
            for i, call in enumerate(reply.tool_calls)
        ]

    def _usage(self, messages: list[BaseMessage], reply: Reply) -> UsageMetadata:
        inputs = sum(_word_count(m.text) for m in messages)
        outputs = _word_count(reply.content)
        return {"input_tokens": inputs, "output_tokens": outputs, "total_tokens": inputs + outputs}

    def _response_metadata(self, reply: Reply) -> dict[str, Any]:
        return {"model_name": self.model_name, "finish_reason": "tool_calls" if reply.tool_calls else "stop"}

    def _result_of(self, reply: Reply, messages: list[BaseMessage]) -> ChatResult:
        message = AIMessage(
            content=reply.content,
            additional_kwargs={"reasoning_content": reply.reasoning} if reply.reasoning else {},
            tool_calls=self._tool_calls(reply),
            usage_metadata=self._usage(messages, reply),
            response_metadata=self._response_metadata(reply),
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _chunks_of(self, reply: Reply, messages: list[BaseMessage]) -> list[ChatGenerationChunk]:
        """All stream pieces of one reply; taken eagerly so an error surfaces before any output."""
        pieces: list[AIMessageChunk] = [
            AIMessageChunk(content="", additional_kwargs={"reasoning_content": piece})
            for piece in (self.script.split_stream(reply.reasoning) if reply.reasoning else [])
        ]
        content = reply.chunks if reply.chunks is not None else self.script.split_stream(reply.content)
        pieces += [AIMessageChunk(content=piece) for piece in content]
        if reply.tool_calls:
            pieces.append(
                AIMessageChunk(
                    content="",
                    tool_call_chunks=[
                        {"name": c["name"], "args": json.dumps(c["args"], ensure_ascii=False), "id": c["id"], "index": i}
                        for i, c in enumerate(self._tool_calls(reply))
                    ],
                )
            )
        if not pieces:
            pieces.append(AIMessageChunk(content=""))
        last = pieces[-1]
        pieces[-1] = AIMessageChunk(
            content=last.content,
            additional_kwargs=last.additional_kwargs,
            tool_call_chunks=last.tool_call_chunks,
            usage_metadata=self._usage(messages, reply),
            response_metadata=self._response_metadata(reply),
            chunk_position="last",
        )
        return [ChatGenerationChunk(message=p) for p in pieces]

    # -- pacing (delay_ms, chunk_interval_ms) ----------------------------------------------------
    def _pauses(self, reply: Reply, chunks: list[ChatGenerationChunk]) -> list[float]:
        """Seconds to wait before each streamed chunk: the reply's delay (else the script's) before the
        first, a chunk's own `delay_ms` before it, and `chunk_interval_ms` before every one."""
        script = self.script
        pauses = [script.chunk_interval] * len(chunks)
        if reply.chunk_delays:
            # the content chunks come after the reasoning pieces and before a tool-call piece
            first = len(script.split_stream(reply.reasoning)) if reply.reasoning else 0
            for i, delay in enumerate(reply.chunk_delays):
                if first + i < len(pauses):
                    pauses[first + i] += delay
        if pauses:
            pauses[0] += script.delay if reply.delay is None else reply.delay
        return pauses

    def _chunks(self, messages: list[BaseMessage], tools: Any = None) -> list[ChatGenerationChunk]:
        """A streamed reply's chunks, taken eagerly; a chunk to wait for carries the pause in its
        `generation_info` (`PAUSE`) until `_paced` takes it off. (Benchmarks wrap this method to see when
        the first chunk is ready: `../shared/oracle/perf/worker_c2g.py`.)"""
        reply = self._take_reply(messages, tools)
        chunks = self._chunks_of(reply, messages)
        for pause, chunk in zip(self._pauses(reply, chunks), chunks):
            if pause:
                chunk.generation_info = {PAUSE: pause}
        return chunks

    def _paced(self, messages: list[BaseMessage], tools: Any) -> list[tuple[float, ChatGenerationChunk]]:
        """A streamed reply's chunks, each with the pause before it."""
        paced = []
        for chunk in self._chunks(messages, tools):
            info = chunk.generation_info or {}
            pause = info.get(PAUSE, 0.0)
            if PAUSE in info:
                chunk.generation_info = None        # not a provider's metadata: it must not reach the message
            paced.append((pause, chunk))
        return paced

    def _unstreamed(self, messages: list[BaseMessage], tools: Any) -> tuple[float, ChatResult]:
        """A whole reply and how long it takes: as long as streaming it would."""
        reply = self._take_reply(messages, tools)
        result = self._result_of(reply, messages)
        if not (self.script.chunk_interval or self.script.delay or reply.delay or reply.chunk_delays):
            return 0.0, result
        return sum(self._pauses(reply, self._chunks_of(reply, messages))), result

    # -- BaseChatModel hooks --------------------------------------------------------------------
    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,  # tools / tool_choice from bind_tools: ignored on purpose
    ) -> ChatResult:
        pause, result = self._unstreamed(messages, kwargs.get("tools"))
        if pause:
            time.sleep(pause)
        return result

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        pause, result = self._unstreamed(messages, kwargs.get("tools"))
        if pause:  # as long as streaming the same reply would take
            await asyncio.sleep(pause)
        return result

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for pause, chunk in self._paced(messages, kwargs.get("tools")):
            if pause:
                time.sleep(pause)
            if run_manager:
                run_manager.on_llm_new_token(chunk.text, chunk=chunk)
            yield chunk

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for pause, chunk in self._paced(messages, kwargs.get("tools")):
            if pause:
                await asyncio.sleep(pause)
            if run_manager:
                await run_manager.on_llm_new_token(chunk.text, chunk=chunk)
            yield chunk
