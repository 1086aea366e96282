"""A scripted LangChain chat model for offline runs and tests.

A *script* (the ``--llm-script`` file, see ``shared/parity/README.md``) lists the replies the
models of one run give, in call order. Users test their agents offline with it, so a malformed
script fails early with a :class:`ScriptError` that says what is wrong and where. The script, its
parsing and its queues are in `runtime/services/llm_script.py`; its names are importable from here too.

One :class:`Script` is shared by every :class:`ScriptedChatModel` of a run: its queues are the
run's single source of truth, consumed in call order whichever component calls. Its `by_message`
rules choose a reply by the message a model is given instead, and are never used up.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool

from canvas2graph.runtime.services.llm_script import MessageRule, Reply, Script, ScriptError, ScriptExhausted, tool_call_arguments

__all__ = [
    "MessageRule",
    "Reply",
    "Script",
    "ScriptError",
    "ScriptExhausted",
    "ScriptedChatModel",
    "ScriptedProviderError",
]

PAUSE = "scripted_pause_s"     # a chunk's pause, between `_chunks` and `_paced`


CITE = "{cite}"                     # in a reply: the id of the first passage the model was given
_PASSAGE = re.compile(r"^ID: (\S+)", re.M)


def _cited(reply: Reply, messages: list[BaseMessage]) -> Reply:
    """`{cite}` in a reply's text as the id of the first passage (`ID: <n>`) in the model's messages, so that a
    scripted answer cites a chunk the retrieval returned, whatever store it came from ("0" when none was given)."""
    if CITE not in (reply.content or "") and not any(CITE in c for c in reply.chunks or []):
        return reply
    found = next((m.group(1) for message in messages for m in [_PASSAGE.search(message.text)] if m), "0")

    chunks = [c.replace(CITE, found) for c in reply.chunks] if reply.chunks else reply.chunks
    return replace(reply, content=(reply.content or "").replace(CITE, found), chunks=chunks)


class ScriptedProviderError(Exception):
    """A scripted ``{"error": ...}`` reply: behaves like a failing LLM provider call."""


def _last_user_text(messages: list[BaseMessage]) -> str:
    """The message a by_message rule reads: the last user message's text ("" when there is none)."""
    return next((m.text for m in reversed(messages) if m.type == "human"), "")


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
        return _cited(reply, messages)

    def _tool_calls(self, reply: Reply) -> list[dict]:
        """LangChain tool calls; ids (``call_<model call>_<index>``) come from :meth:`Script.next_reply`."""
        return [
            {
                "name": call["name"],
                "args": tool_call_arguments(call.get("arguments"), f"tool call {call['name']!r}"),
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
