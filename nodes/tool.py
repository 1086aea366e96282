"""The base of every tool component (SPEC 3.17): one class serves as a canvas node and as an Agent tool.

A tool declares its *arguments* (RAGFlow's `meta.parameters`): what a model fills in when an Agent
calls it, and what the DSL's params fill in (usually `"sys.query"`) when it runs as a node. It
implements `execute(args, ctx)`, the real call to its service, returning a `ToolOutput`. The base
class does the rest the same way for both uses: scripted `tool_results`, retries, the reference
store for search results, and the text the model sees.

As a node, a failure raises (so LangGraph's retry policy and the component's exception settings
apply). As an Agent tool, `call()` retries `max_retries` times and a final failure becomes the
tool result "<Tool> error: ..." that the model reads, as RAGFlow's ToolBase returns it.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from canvas2graph.nodes.base import Node, Result, bare_or_braced_ref, settle_pending
from canvas2graph.runtime.graph.state import REFERENCE
from canvas2graph.runtime.graph.values import render, resolve


@dataclass(frozen=True)
class ToolArg:
    """One argument of a tool: its JSON-schema type, what the model is told, and the node default."""

    type: str
    description: str
    required: bool = False
    default: Any = "sys.query"
    enum: tuple[str, ...] | None = None


@dataclass
class ToolOutput:
    """What one execution produced."""

    outputs: dict[str, Any]                       # the component's outputs (formalized_content, json, ...)
    chunks: list[dict] = field(default_factory=list)   # citable results, in RAGFlow's chunks_format shape
    text: str | None = None                       # what the model reads; formalized_content when None
    doc_aggs: list[dict] | None = None            # RAGFlow's doc_aggs when the service counts them itself


class ToolError(Exception):
    """A tool's service refused or failed; the message is what the model and the node report."""


EMPTY_REFERENCE: dict[str, Any] = {"chunks": {}, "doc_aggs": {}}


class Tool(Node):
    function_name: ClassVar[str] = ""
    tool_description: ClassVar[str] = ""
    args: ClassVar[dict[str, ToolArg]] = {}
    retry_inside: ClassVar[bool] = True       # as an Agent tool, retry max_retries times before giving up

    # --- compile time -------------------------------------------------------------------
    def prepare(self) -> None:
        # each argument's node-mode value, parsed once: a whole ref, a template with refs, or a literal
        self.arg_sources: dict[str, tuple[str, Any]] = {}
        for name, arg in self.args.items():
            value = getattr(self.params, name, None)
            if value is None:
                value = self.params.extra(name, arg.default)
            if value is None:
                continue
            ref = bare_or_braced_ref(value)
            if ref is not None:
                self.arg_sources[name] = ("ref", ref)
            elif isinstance(value, str) and "{" in value:
                self.arg_sources[name] = ("template", self.text_template(value))
            else:
                self.arg_sources[name] = ("literal", value)
        self.prepare_tool()

    def prepare_tool(self) -> None:
        """Checks of a tool's own params (raise NodeConfigError naming the field)."""

    def references(self):
        found = []
        for name, (kind, source) in self.arg_sources.items():
            if kind == "ref":
                found.append((f"params.{name}", source))
            elif kind == "template":
                found += [(f"params.{name}", r) for r in source.refs]
        return found

    @property
    def tool_parameters(self) -> dict[str, dict]:
        """The JSON-schema properties the model sees (array `items` dropped, as RAGFlow drops them)."""
        props = {}
        for name, arg in self.args.items():
            prop: dict[str, Any] = {"type": arg.type, "description": arg.description}
            if arg.enum:
                prop["enum"] = list(arg.enum)
            props[name] = prop
        return props

    @property
    def tool_required(self) -> list[str]:
        return [name for name, arg in self.args.items() if arg.required]

    # --- run time ------------------------------------------------------------------------
    def node_args(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """RAGFlow's get_input(): each argument resolved from the DSL's params."""
        args = {}
        for name, (kind, source) in self.arg_sources.items():
            if kind == "ref":
                args[name] = resolve(state, source)
            elif kind == "template":
                args[name] = render(source, state)
            else:
                args[name] = source
        return args

    async def run(self, state, ctx) -> Result:
        state, writes = await settle_pending(self, [r for _, r in self.references()], state, ctx)
        args = self.node_args(state)
        outputs, reference, _ = await self.call(args, ctx, retry=False)
        if reference["chunks"] or reference["doc_aggs"]:
            writes[REFERENCE] = reference
        return Result(outputs=outputs, inputs=args, writes=writes)

    async def call(self, args: dict, ctx, *, function_name: str | None = None, retry: bool = True,
                   state: Mapping[str, Any] | None = None) -> tuple[dict, dict, str]:
        """One execution: (outputs, reference-store entries, text for the model).

        Scripted `tool_results` replace the execution. With `retry`, failures are retried
        `max_retries` times `delay_after_error` apart and then raised. `state` is the canvas an
        Agent runs in, for tools that also read canvas references (CodeExec); others ignore it.
        """
        scripted = self.scripted_result(ctx, function_name)
        if scripted is not None:
            return scripted
        attempts = self.params.max_retries + 1 if retry and self.retry_inside else 1
        for attempt in range(attempts):
            try:
                out = await self.execute(args, ctx)
                break
            except Exception:
                if attempt + 1 >= attempts:
                    raise
                await asyncio.sleep(self.params.delay_after_error)
        reference = references_of(out.chunks, out.doc_aggs) if out.chunks else {"chunks": {}, "doc_aggs": {}}
        text = out.text if out.text is not None else as_text(out.outputs.get("formalized_content", out.outputs))
        return out.outputs, reference, text

    def scripted_result(self, ctx, function_name: str | None) -> tuple[dict, dict, str] | None:
        """The script's next `tool_results` entry for this tool, as call() returns it; None without one."""
        script = getattr(ctx, "script", None)
        found = script.next_tool_result(component_name=self.component_type, function_name=function_name,
                                        component_id=self.id) if script is not None else None
        return None if found is None else _scripted(found)

    async def execute(self, args: dict, ctx) -> ToolOutput:
        """Call the service. Raise ToolError (or any exception) on failure."""
        raise NotImplementedError


# --- helpers shared by tool families -----------------------------------------------------

def endpoint(service: str, default: str) -> str:
    """A service's base URL; `CANVAS2GRAPH_<SERVICE>_URL` points it elsewhere (a proxy, a test server)."""
    return os.environ.get(f"CANVAS2GRAPH_{service.upper()}_URL", default).rstrip("/")


def chunk_key(chunk_id: str) -> str:
    """RAGFlow's hash_str2int(chunk_id, 500): the n of `[ID:n]` (collisions are possible, as there)."""
    return str(int(hashlib.sha1(chunk_id.encode("utf-8")).hexdigest(), 16) % 500)


def web_chunk(*, title: str, url: str, content: str, **extra: Any) -> dict:
    """A web result as a citable chunk (chunks_format shape); its id is stable for the same page."""
    cid = hashlib.sha1(f"{url}\n{content}".encode("utf-8")).hexdigest()[:16]
    return {"id": cid, "content": content, "document_id": cid, "document_name": title, "dataset_id": "",
            "image_id": "", "positions": [], "url": url, "similarity": 1.0, "vector_similarity": 1.0,
            "term_similarity": 1.0, "row_id": None, "doc_type": "", "document_metadata": None, **extra}


def references_of(chunks: list[dict], doc_aggs: list[dict] | None = None) -> dict[str, Any]:
    """The reference-store entries for these chunks: {chunks: {n: chunk}, doc_aggs: {name: agg}}.

    `doc_aggs` given (a knowledge-base search counts every chunk that passed, not just the page) are
    used as they are; otherwise the chunks are counted."""
    store: dict[str, Any] = {"chunks": {}, "doc_aggs": {}}
    if doc_aggs is not None:
        store["chunks"] = {chunk_key(c["id"]): c for c in chunks}
        store["doc_aggs"] = {a["doc_name"]: dict(a) for a in doc_aggs}
        return store
    for c in chunks:
        store["chunks"][chunk_key(c["id"])] = c
        agg = store["doc_aggs"].setdefault(c["document_name"], {"doc_name": c["document_name"], "doc_id": c["document_id"], "count": 0})
        agg["count"] += 1
    return store


def formalize(chunks: list[dict]) -> str:
    """Chunk blocks the model reads, each headed by the id it must cite (RAGFlow's kb_prompt layout)."""
    blocks = []
    for c in chunks:
        lines = [f"ID: {chunk_key(c['id'])}", f"├── Title: {c['document_name']}"]
        if c.get("url"):
            lines.append(f"├── URL: {c['url']}")
        for k, v in (c.get("document_metadata") or {}).items():
            lines.append(f"├── {k}: {v}")
        lines.append("└── Content:")
        lines.append(c["content"])
        blocks.append("\n".join(lines))
    return "\n" + "\n\n".join(blocks)


def found(chunks: list[dict], raw: Any = None, *, empty: str = "", doc_aggs: list[dict] | None = None) -> ToolOutput:
    """The ToolOutput of a search: formalized_content for the model, json for the canvas, citable chunks."""
    if not chunks:
        return ToolOutput({"formalized_content": empty, "json": raw if raw is not None else []})
    return ToolOutput({"formalized_content": formalize(chunks), "json": raw if raw is not None else chunks}, chunks,
                      doc_aggs=doc_aggs)


def as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _scripted(entry: Any) -> tuple[dict, dict, str]:
    if isinstance(entry, str):
        return {"formalized_content": entry}, {"chunks": {}, "doc_aggs": {}}, entry
    outputs = dict(entry.get("outputs") or {})
    text = entry.get("return", outputs.get("formalized_content", ""))
    return outputs, {"chunks": {}, "doc_aggs": {}}, as_text(text)
