"""Agent: an LLM that calls tools (SPEC 3.4, 7).

Tools come from the DSL's `params.tools` (tool components such as Retrieval, and sub-agents) and
reach the model through LangChain's `bind_tools`, named as RAGFlow names them: `<function>_<index>`.
The loop makes up to `max_rounds + 1` model calls; each round's tool calls run concurrently and
their results (or errors) go back to the model. An Agent without tools behaves as the LLM component.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from functools import partial
from typing import Any, AsyncIterator

from pydantic import Field, ValidationError

from canvas2graph.compiler.dsl.model import ComponentEntry
from canvas2graph.types import NodeConfigError
from canvas2graph.nodes.base import Node, Result
from canvas2graph.nodes.errors import classify
from canvas2graph.nodes.llm import (LLM, AnswerText, LLMParams, check_last_message, merge_think_blocks,
                       parse_json_answer, report_usage, stream_pieces, text_of, to_langchain)
from canvas2graph.nodes.prompts import citation_pass, citation_rules, force_json, full_question
from canvas2graph.nodes.registry import KNOWN_ELSEWHERE, lookup, register
from canvas2graph.runtime.graph import calls
from canvas2graph.runtime.services import model_calls
from canvas2graph.runtime.services.models import ModelConfigError
from canvas2graph.nodes.tool import Tool, as_text, formalize
from canvas2graph.nodes.tools.code_exec import artifact_markdown
from canvas2graph.nodes.mcp_tools import build_mcp_tools, call_mcp_tool, is_mcp_tool, mcp_sessions
from canvas2graph.runtime.graph.state import REFERENCE, merge_reference
from canvas2graph.runtime.services.observability import tool_run
from canvas2graph.runtime.graph.values import PENDING, ref_values


class AgentParams(LLMParams):
    tools: list[Any] = Field(default_factory=list)
    mcp: list[Any] = Field(default_factory=list)
    max_rounds: int = Field(5, ge=0)


SUB_AGENT_PARAMETERS = {
    "user_prompt": {"type": "string", "description": "The task for this agent."},
    "reasoning": {"type": "string", "description": "Why this agent is being asked."},
    "context": {"type": "string", "description": "What the agent needs to know to do it."},
}


@dataclass
class AgentTool:
    name: str                 # what the model calls: "<function>_<index>"
    schema: dict              # OpenAI function schema
    component: Node           # the tool component that runs it


def _schema(name: str, description: str, parameters: dict, required: list[str]) -> dict:
    return {"type": "function", "function": {"name": name, "description": description,
                                             "parameters": {"type": "object", "properties": parameters, "required": required}}}


def build_tools(agent: "Agent") -> list[AgentTool]:
    tools: list[AgentTool] = []
    for idx, entry in enumerate(agent.params.tools):
        where = f"params.tools.{idx}"
        if not isinstance(entry, dict) or not isinstance(entry.get("component_name"), str):
            raise NodeConfigError(where, "each tool must be an object with a component_name")
        name = entry["component_name"]
        spec = lookup(name)
        if spec is None or (name != "Agent" and not issubclass(spec.node, Tool)):
            if spec is not None:
                raise NodeConfigError(f"{where}.component_name", f"{name!r} is a canvas component, not a tool an "
                                      "Agent can call", "unsupported")
            if name in KNOWN_ELSEWHERE:
                raise NodeConfigError(f"{where}.component_name", f"{name!r} belongs to RAGFlow's ingestion pipeline, "
                                      "not to an agent", "unsupported")
            raise NodeConfigError(f"{where}.component_name", f"unknown tool {name!r}", "unknown-component")
        raw = entry.get("params") or {}
        try:
            params = spec.params.model_validate(raw)
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            raise NodeConfigError(f"{where}.params.{loc}", err["msg"].removeprefix("Value error, "))
        label = str(entry.get("name") or name)
        tool_id = f"{agent.id}-->{label.replace(' ', '_')}"
        try:
            component = spec.node(ComponentEntry(id=tool_id, component_name=name, params=raw, downstream=[],
                                                 display_name=label), params, agent.canvas)
        except NodeConfigError as e:          # a sub-agent's own tools: report the full path
            raise NodeConfigError(f"{where}.{e.field}", e.message, e.code) from e
        if name == "Agent":
            function = label.replace(" ", "_")
            description = params.description or "This is an agent for a specific task."
            schema = _schema(f"{function}_{idx}", description, SUB_AGENT_PARAMETERS, list(SUB_AGENT_PARAMETERS))
        else:
            function = component.function_name
            description = params.description or component.tool_description
            schema = _schema(f"{function}_{idx}", description, component.tool_parameters, component.tool_required)
        tools.append(AgentTool(f"{function}_{idx}", schema, component))
    return tools


@register("Agent", AgentParams, outputs=lambda p: {"content", "structured"})
class Agent(LLM):
    def prepare(self) -> None:
        super().prepare()
        self.tools = build_tools(self)
        self.tools += build_mcp_tools(self, first_index=len(self.params.tools))   # numbered after params.tools
        self.by_name = {t.name: t for t in self.tools}

    async def run(self, state, ctx) -> Result:
        messages = self.build_messages(state)
        check_last_message(messages)
        inputs = ref_values(self.all_refs(), state)
        if self.streams:        # the downstream Message runs the loop and streams it (SPEC 5.7)
            default = self.params.exception_default_value if self.params.exception_method == "comment" else None
            return Result(outputs={"content": {PENDING: True, "agent": True, "component_id": self.id,
                                               "llm_id": self.params.llm_id, "gen_conf": self.params.gen_conf(),
                                               "messages": messages, "default": default}}, inputs=inputs)
        if not self.tools:
            return await super().run(state, ctx)          # an Agent without tools is an LLM
        sink: dict[str, Any] = {}
        async for _ in self.rounds(messages, ctx, sink, state, stream=False):
            pass
        _append_artifacts(sink)
        outputs: dict[str, Any] = {"content": sink["answer"]}
        if self.schema is not None:
            outputs = {"structured": await self._structured(sink["answer"], ctx)}
        writes = {REFERENCE: sink["reference"]} if sink.get("reference") else {}
        return Result(outputs=outputs, inputs=inputs, writes=writes)

    async def _structured(self, answer: str, ctx) -> Any:
        """Parse the answer as JSON; if it is not, ask again for JSON only, `max_retries + 1` times (SPEC 7)."""
        value = parse_json_answer(answer)
        attempts = 0
        while value is None and attempts < self.params.max_retries + 1:
            attempts += 1
            model = self._model(ctx)
            reply = None
            async for _, reply in self._call(model, to_langchain(force_json(self.schema)), False):
                pass
            answer = text_of(reply.content)
            value = parse_json_answer(answer)
        if value is None:
            raise ValueError(f"the answer is not valid JSON: {answer[:200]}")
        return value

    async def stream_pending(self, pending, ctx, sink: dict, state=None) -> AsyncIterator[str]:
        """Used by the Message that shows this Agent: the streaming path of SPEC 7.

        What streams: the model's text, its reasoning and a "Running the X tool..." notice per tool
        call as thinking, thinking that follows thinking shown as one block (`merge_think_blocks`).
        The Agent's content is the answer: what it wrote outside the thinking, in every round.

        A long conversation is first rewritten into one question. With `cite` and chunks in the
        turn's reference store, the answer either carries markers from the start (citation rules in
        the system prompt) or, when the chunks arrive only through this Agent's own tools, is
        written silently and then re-streamed through a citation pass.
        """
        if not pending.get("agent"):
            async for piece in super().stream_pending(pending, ctx, sink, state):
                yield piece
            return
        messages = list(pending["messages"])
        if len(messages) > 3:
            # the rewritten question replaces the last message's text; its images stay with it
            messages[-1] = {**messages[-1], "role": "user", "content": await self._full_question(messages, ctx)}
        before = (state or {}).get(REFERENCE) if state is not None else None

        def store() -> dict:
            return merge_reference(before, sink.get("reference") or {})

        def need_citations() -> bool:
            return bool(self.params.cite and store()["chunks"])

        cited = False
        if need_citations() and messages[0]["role"] == "system" and len(messages) < 7:
            messages[0] = {"role": "system", "content": messages[0]["content"] + "\n\n" + citation_rules()}
            cited = True
        answer = AnswerText()
        async for piece in merge_think_blocks(self.rounds(messages, ctx, sink, state, stream=True)):
            answer.add(piece)
            # asked piece by piece: chunks found by a tool turn the rest of this stream silent
            if cited or not need_citations():
                yield piece
        sink["answer"] = answer.text
        if not cited and need_citations():
            sources = formalize(list(store()["chunks"].values()))
            history = to_langchain(citation_pass(sources) + [{"role": "user", "content": sink["answer"]}])
            answer = AnswerText()
            async for piece in merge_think_blocks(self._pieces(self._model(ctx, tools=False), history)):
                answer.add(piece)
                yield piece
            sink["answer"] = answer.text
        extra = _append_artifacts(sink)
        if extra:
            yield extra

    async def _full_question(self, messages: list[dict], ctx) -> str:
        model = self._model(ctx, tools=False)
        reply = None
        async for _, reply in self._call(model, to_langchain(full_question(messages)), False):
            pass
        return _answer(text_of(reply.content)).strip() or messages[-1]["content"]

    def _model(self, ctx, *, tools: bool = True):
        model = ctx.models.chat_model(self.params.llm_id, component_id=self.id, gen_conf=self.params.gen_conf())
        return model.bind_tools([t.schema for t in self.tools]) if tools and self.tools else model

    async def rounds(self, messages, ctx, sink: dict, state, *, stream: bool) -> AsyncIterator[str]:
        async with mcp_sessions(self, ctx, sink):        # MCP sessions live as long as one tool loop
            async for piece in self._tool_loop(messages, ctx, sink, state, stream=stream):
                yield piece

    async def _tool_loop(self, messages, ctx, sink: dict, state, *, stream: bool) -> AsyncIterator[str]:
        """The tool loop. Yields what the user sees when streaming; leaves the final reply's text in
        sink["answer"] (the content of an Agent that does not stream)."""
        from langchain_core.messages import HumanMessage, ToolMessage   # here: `compile` needs no LangChain
        model = self._model(ctx)
        calls.prompt(self.id, messages)
        history = to_langchain(messages)
        for _ in range(self.params.max_rounds + 1):
            reply = None
            async for piece, reply in self._call(model, history, stream):
                if piece is not None:
                    yield piece
            if not reply.tool_calls:
                sink["answer"] = _answer(text_of(reply.content))
                return
            history.append(reply)
            for call in reply.tool_calls:             # announced before they run, each as thinking
                yield "<think>"
                yield f"Running the {call['name']} tool..."
                yield "</think>"
            results = await asyncio.gather(*(self._run_tool(call, ctx, sink, state) for call in reply.tool_calls))
            history += [ToolMessage(content=r, tool_call_id=c["id"]) for c, r in zip(reply.tool_calls, results)]
        history.append(HumanMessage(content=f"Exceed max rounds: {self.params.max_rounds}"))
        async for piece, reply in self._call(model, history, stream):
            if piece is not None:
                yield piece
        sink["answer"] = _answer(text_of(reply.content))

    async def _pieces(self, model, history) -> AsyncIterator[str]:
        async for piece, _ in self._call(model, history, True):
            if piece is not None:
                yield piece

    async def _call(self, model, history, stream: bool):
        """One model call: (piece, None) pairs while it streams; the last pair is (None, the whole reply)."""
        try:
            if not stream:
                reply = await model_calls.invoke(model, history)
                report_usage(reply, self.id)
                yield None, reply
                return
            async for piece, reply in stream_pieces(model, history):
                if piece is None:
                    report_usage(reply, self.id)
                yield piece, reply
        except ModelConfigError:
            raise
        except Exception as e:
            raise classify(e) from e

    async def _run_tool(self, call: dict, ctx, sink: dict, state) -> str:
        """A tool's result as the model sees it; a tool run in the traces when tracing is on."""
        started = time.perf_counter()
        result = await tool_run(call["name"], call.get("args") or {}, call.get("id"),
                                partial(self._call_tool, call, ctx, sink, state), agent_id=self.id)
        calls.tool_call(self.id, call, result, time.perf_counter() - started)
        return result

    async def _call_tool(self, call: dict, ctx, sink: dict, state) -> str:
        """A tool's result as the model sees it; failures are results too (the model may recover)."""
        tool = self.by_name.get(call["name"])
        if tool is None:
            return f"There is no tool named {call['name']}."
        if is_mcp_tool(tool):
            return await call_mcp_tool(tool, call, ctx, sink)
        component = tool.component
        try:
            if isinstance(component, Agent):
                scripted = ctx.script.next_tool_result(component_name="Agent", function_name=call["name"],
                                                       component_id=component.id) if ctx.script is not None else None
                if scripted is not None:
                    return as_text(scripted.get("return", "")) if isinstance(scripted, dict) else str(scripted)
                return await component.as_tool(call.get("args") or {}, ctx, state)
            outputs, reference, text = await component.call(call.get("args") or {}, ctx,
                                                            function_name=call["name"], state=state)
        except Exception as e:       # the model reads the failure and may recover, as in RAGFlow
            return f"{component.component_type} error: {e}"
        if outputs.get("_ARTIFACTS"):          # CodeExec's files, shown after the answer
            sink.setdefault("artifacts", []).extend(outputs["_ARTIFACTS"])
        if reference["chunks"]:
            sink["reference"] = merge_reference(sink.get("reference") or {}, reference)
        return text

    async def as_tool(self, args: dict, ctx, state) -> str:
        """Run as another Agent's tool: a blocking call on the composed task (SPEC 7, sub-agents)."""
        prompt = str(args.get("user_prompt") or "")
        if args.get("reasoning") or args.get("context"):
            prompt = f"\nREASONING:\n{args.get('reasoning', '')}\n\nCONTEXT:\n{args.get('context', '')}\n\nQUERY:\n{prompt}\n"
        # RAGFlow replaces the sub-agent's prompts with the task; the turn's files are added as for any call
        messages = (self.build_messages(state, task=prompt) if state is not None
                    else [{"role": "user", "content": prompt}])
        sink: dict[str, Any] = {}
        if not self.tools:
            from canvas2graph.nodes.llm import complete
            return await complete(self.params.llm_id, self.id, messages, ctx, self.params.gen_conf())
        async for _ in self.rounds(messages, ctx, sink, state, stream=False):
            pass
        return sink["answer"]


def _append_artifacts(sink: dict) -> str:
    """Add the markdown of the tools' artifacts to sink["answer"] (SPEC 7); returns what was added."""
    markdown = artifact_markdown(sink.get("artifacts"), sink["answer"])
    if not markdown:
        return ""
    extra = "\n\n" + markdown
    sink["answer"] += extra
    return extra


def _answer(text: str) -> str:
    """The answer without reasoning, as RAGFlow's Agent content is."""
    return text.split("</think>", 1)[1] if "</think>" in text else text
