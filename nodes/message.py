"""Message: shows text to the user, streaming pending generations through (SPEC 3.5, 5.7, 6.3)."""
from __future__ import annotations

import asyncio

import random
import re
import time
from typing import Any

from pydantic import Field, field_validator

from canvas2graph.compiler.dsl.refs import Template
from canvas2graph.nodes import jinja
from canvas2graph.nodes.base import ComponentError, Node, Params, Result, shared_generation, stream_writer
from canvas2graph.nodes.downloads import shown_text
from canvas2graph.nodes.jinja import replace_names
from canvas2graph.nodes.llm import AnswerText, stream_generation
from canvas2graph.nodes.registry import register
from canvas2graph.runtime.graph.state import REFERENCE, channel, merge_reference, outputs_of
from canvas2graph.runtime.graph.values import is_pending, render, resolve



class MessageParams(Params):
    content: list[str] = Field(default_factory=list)
    stream: bool = True
    output_format: str | None = None
    auto_play: bool = False
    memory_ids: list[str] = Field(default_factory=list)     # memories the exchange is saved to (issue 35)
    user_id: str | None = ""                               # whose memory: a literal or a {variable}

    @field_validator("memory_ids", mode="before")
    @classmethod
    def _memory_ids(cls, v: Any) -> Any:
        if v is None:
            return []
        return [v] if isinstance(v, str) else v

    @field_validator("content", mode="before")
    @classmethod
    def _content(cls, v: Any) -> Any:
        if not v:
            raise ValueError("content must have at least one message text")
        if isinstance(v, str):
            v = [v]
        return [c if isinstance(c, str) else str(c) for c in v]


def _sanitised(expr: str) -> str:
    return re.sub(r"[@:.]", "_", expr)


@register("Message", MessageParams, outputs=lambda p: {"content", "downloads", "attachment"})
class Message(Node):
    param_outputs = ("content", "downloads")

    def prepare(self) -> None:
        self.templates: list[Template] = [self.text_template(c) for c in self.params.content]
        user_id = (self.params.user_id or "").strip()
        self.user_template = self.text_template(user_id) if user_id else None

    def references(self):
        refs = [(f"params.content.{i}", r) for i, t in enumerate(self.templates) for r in t.refs]
        return refs + [("params.user_id", r) for r in (self.user_template.refs if self.user_template else [])]

    async def run(self, state, ctx) -> Result:
        t = self.templates[0] if len(self.templates) == 1 else random.choice(self.templates)
        write = stream_writer()
        downloads: list[dict[str, Any]] = []         # files a DocGenerator offers, shown as downloads, not text
        answer = None
        if self.params.stream and not t.has_jinja:
            content, inputs, writes, answer = await self._stream(t, state, ctx, write, downloads)
        else:
            content, inputs, writes = await self._render(t, state, ctx, downloads)
            write({"event": "message", "content": content})
        end: dict[str, Any] = {}
        status = self.params.extra("status")
        if status is not None:
            end["status"] = status
        if downloads:
            end["downloads"] = downloads
        reference = merge_reference(state.get(REFERENCE), writes.get(REFERENCE) or {})
        if reference.get("chunks") or reference.get("doc_aggs"):
            end["reference"] = reference
        write({"event": "message_end", **end})
        if self.params.memory_ids:
            await self._remember(state, ctx, content)
        return Result(outputs={"content": content, "downloads": downloads}, inputs=inputs, writes=writes,
                      answer=answer if answer != content else None)

    async def _remember(self, state, ctx, content: str) -> None:
        """Save the exchange (the user's query and this answer) to the Message's memories, once the answer is out.
        Its typed memories are extracted after the turn (runtime/services/memory/extraction.py)."""
        from canvas2graph.nodes.memory_access import book_for, exchange_key, thread_id
        from canvas2graph.runtime.graph.state import GLOBALS
        from canvas2graph.runtime.services.memory import MemoryNotFound
        book = book_for(ctx, self.id, "params.memory_ids")
        globals_ = state.get(GLOBALS) or {}
        query = str(globals_.get("sys.query") or "")
        user_id = ""
        if self.user_template is not None:
            user_id = render(self.user_template, state)
        user_id = user_id or str(globals_.get("sys.user_id") or "")
        session = getattr(ctx, "session_id", "") or thread_id()
        key = exchange_key(session, globals_.get("sys.conversation_turns"), self.id, query, content)
        try:
            await book.add_exchange(self.params.memory_ids, user_input=query, agent_response=content, user_id=user_id,
                                    agent_id=str(ctx.extras.get("agent_id") or ""), session_id=session, key=key)
        except MemoryNotFound as e:
            raise ComponentError(self.id, f"params.memory_ids: {e} (the answer was given; it was not saved there)") from None

    async def _stream(self, t: Template, state, ctx, write, downloads: list):
        """Spliced substitution, as RAGFlow's streaming Message (spaces next to refs vanish).

        Returns the content (thinking included, as RAGFlow's), the inputs, the writes and the answer:
        the content less the thinking of the generations it relayed."""
        parts: list[str] = []
        said: list[str] = []
        inputs: dict[str, Any] = {}
        writes: dict[str, Any] = {}
        for part in t.spliced:
            if isinstance(part, str):
                text = part
            else:
                value = resolve(state, part)
                if is_pending(value) and part.expr in inputs:
                    # named again: the stream is consumed once; RAGFlow shows the finished text this time
                    text = str((writes.get(channel(value["component_id"])) or {}).get("content", inputs[part.expr]))
                    write({"event": "message", "content": text})
                    parts.append(text)
                    continue
                if is_pending(value):          # relayed piece by piece as the model writes
                    shown, answer = await self._relay(value, ctx, write, writes, state)
                    parts.append(inputs.setdefault(part.expr, shown))
                    said.append(answer)
                    continue
                text = inputs[part.expr] = shown_text(value, downloads)
            if text:
                write({"event": "message", "content": text})
            parts.append(text)
            said.append(text)
        return "".join(parts), inputs, writes, "".join(said)

    async def _relay(self, pending, ctx, write, writes, state) -> tuple[str, str]:
        """Stream a pending generation chunk by chunk; record the producer's final content. Returns the
        text shown (thinking included) and the text outside the thinking.

        The Message shows everything, thinking included (between start_to_think and end_to_think
        events); the producer's content is its answer alone, unless the producer says otherwise.
        """
        producer = pending["component_id"]
        answer = AnswerText()
        shown: list[str] = []
        created = outputs_of(state, producer).get("_created_time", time.perf_counter())
        future, mine = shared_generation(ctx, producer, created)
        if not mine:        # a reader in this step already runs it: show its text once it is there
            text = str(await asyncio.shield(future))
            write({"event": "message", "content": text})
            writes[channel(producer)] = {"content": text, "_elapsed_time": time.perf_counter() - created}
            return text, text
        node = self.canvas.nodes.get(producer)
        sink: dict[str, Any] = {}
        source = node.stream_pending(pending, ctx, sink, state) if node is not None else stream_generation(pending, ctx)
        try:
            async for piece in source:
                self._show(piece, write, shown)
                answer.add(piece)
                # let the stream's reader deliver the piece before the next one is handled: chunks that
                # arrive together (one socket read, a scripted reply) would otherwise all be processed
                # before the first reaches the client (first chunk -> message event: 0.26 -> 0.12 ms)
                await asyncio.sleep(0)
        except Exception as e:      # the failure belongs to the LLM whose generation this is
            if not pending.get("default"):
                if future is not None:
                    future.set_exception(e)
                message = str(e) or type(e).__name__
                raise ComponentError(producer, message, {"_created_time": created, "_ERROR": message,
                                                         "_elapsed_time": time.perf_counter() - created}) from e
            default = str(pending["default"])       # exception_method "comment": the default is the answer
            write({"event": "message", "content": default})
            shown.append(default)
            sink["answer"] = default
        content = sink.get("answer", answer.text)    # an Agent says what its content is (e.g. after a citation pass)
        if future is not None:
            future.set_result(content)
        writes[channel(producer)] = {"content": content, "_elapsed_time": time.perf_counter() - created}
        if sink.get("reference"):
            writes[REFERENCE] = merge_reference(writes.get(REFERENCE), sink["reference"])
        return "".join(shown), (sink["answer"] if "answer" in sink else answer.text)

    @staticmethod
    def _show(piece: str, write, shown: list[str]) -> None:
        if piece == "<think>":
            write({"event": "message", "content": "", "start_to_think": True})
        elif piece == "</think>":
            write({"event": "message", "content": "", "end_to_think": True})
        else:
            write({"event": "message", "content": piece})
            shown.append(piece)

    async def _render(self, t: Template, state, ctx, downloads: list):
        """Exact substitution with Jinja rendering (non-streaming mode)."""
        from canvas2graph.nodes.base import settle_pending
        state, writes = await settle_pending(self, t.refs, state, ctx)
        values = {r.expr: resolve(state, r) for r in t.refs}
        shown = {expr: shown_text(value, downloads) for expr, value in values.items()}
        # RAGFlow swaps each {ref} for a plain name Jinja can use, renders, then swaps names for values.
        text = "".join(p if isinstance(p, str) else _sanitised(p.expr) for p in t.exact)
        if t.has_jinja:
            try:
                text = jinja.render(jinja.compile_template(text), {_sanitised(k): v for k, v in values.items()})
            except jinja.TemplateLimit:
                raise         # a bound, not a template RAGFlow would fail on
            except Exception:
                pass          # RAGFlow falls back to the raw text when Jinja fails
        text = replace_names(text, {_sanitised(expr): shown[expr] for expr in values})
        return text, shown, writes
