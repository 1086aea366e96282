"""CodeExec: run a Python or JavaScript `main` and type-check what it returns (SPEC 3.17).

As a canvas node, `lang` and `script` come from the params and `arguments` (`{name: <reference>}`)
are read from the state, then passed to `main`. As an Agent tool (`execute_code`) the model writes
`lang` and `script`; `arguments` still come from the canvas (when the Agent hands the state over)
unless the model passes a value under the same name, as in RAGFlow.

The value `main` returns (or, when it returns nothing, what it printed, read as JSON or a Python
literal) goes to the one *business* output after a check against its declared type; `content` is
its text plus a section per artifact; `raw_result`, `actual_type`, `attachments` (markdown links),
`_ARTIFACTS` ([{name, url, mime_type, size}]) and `_ATTACHMENT_CONTENT` follow RAGFlow. `_ERROR` is
"" on success. Failures (the script's errors, time and memory limits, a type mismatch, local
execution switched off) set `_ERROR`: a node fails with it; a tool hands it to the model with the
other outputs, as RAGFlow does.

Where the code runs is the run's code policy (`ctx.extras["code"]`, see `canvas2graph.runtime.services.sandbox.policy`).
"""
from __future__ import annotations

import ast
import json
import time
from typing import Any, Mapping

from pydantic import Field, field_validator

from canvas2graph.compiler.dsl.refs import Ref, looks_like_ref, parse_ref
from canvas2graph.nodes.base import ComponentError, Params, Result, settle_pending
from canvas2graph.nodes.registry import register
from canvas2graph.nodes.tool import Tool, ToolArg, ToolOutput
from canvas2graph.nodes.tools._code_contract import (SYSTEM_OUTPUTS, ContractError, actual_type, business_output, canonical_text,
                                        check_domain, check_value, normalize_value)
from canvas2graph.runtime.services.sandbox import (ArtifactStoreError, CodePolicy, CodePolicyError, CodeRefused, SandboxUnavailable,
                             attachment_content, run_code, store_artifacts)
from canvas2graph.runtime.graph.values import ReferenceError_, resolve

LANGUAGES = ("python", "python3", "nodejs", "javascript")
DEFAULT_SCRIPT = 'def main(arg1: str, arg2: str) -> dict:\n    return {"result": arg1 + arg2}\n'

DESCRIPTION = """\
Runs a piece of Python or JavaScript code in a sandbox and returns what its `main` function returns, as JSON.

The code MUST define a function named `main`. Python calls `main()` and uses its return value, for example:
def main() -> dict:
    values = [3, 1, 4, 1, 5, 9, 2, 6]
    return {"mean": sum(values) / len(values), "max": max(values)}

JavaScript calls `main(args)`, awaiting it when it is async; define or export it:
async function main(args) {
  return { total: [1, 2, 3].reduce((a, b) => a + b, 0) };
}
module.exports = { main };

To produce charts or files (PNG, JPEG, SVG, PDF, CSV, JSON, HTML), write them into the `artifacts/` folder of the
working directory, e.g. `fig.savefig("artifacts/chart.png")` after `matplotlib.use("Agg")`. They are collected,
linked in the answer, and their text (for text files) is added to the tool's `content`."""


class CodeExecParams(Params):
    lang: str = "python"
    script: str = DEFAULT_SCRIPT
    arguments: dict[str, Any] = Field(default_factory=dict)
    # RAGFlow's defaults: an Object business output `result`, plus the attachments list
    outputs: Any = Field(default_factory=lambda: {"result": {"value": "", "type": "object"},
                                                  "attachments": {"value": [], "type": "Array<String>"}})

    @field_validator("lang")
    @classmethod
    def _lang(cls, v: str) -> str:
        if v not in LANGUAGES:
            raise ValueError(f"lang must be one of {', '.join(LANGUAGES)}, not {v!r}")
        return v

    @field_validator("script")
    @classmethod
    def _script(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("the script is empty; it must define a function named main")
        return v

    @field_validator("arguments")
    @classmethod
    def _arguments(cls, v: dict[str, Any]) -> dict[str, Any]:
        for name, source in v.items():
            # RAGFlow reads each value as a variable name; a constant there fails every run
            if source in (None, ""):
                continue
            if not isinstance(source, str) or not looks_like_ref(source):
                raise ValueError(f"argument {name!r} must be a variable reference such as 'sys.query' or "
                                 f"'Component:Id@output', not the constant {source!r}")
        return v

    @field_validator("outputs")
    @classmethod
    def _outputs(cls, v: Any) -> Any:
        if not isinstance(v, dict):
            raise ValueError("outputs must be an object of {name: {type, value}}")
        try:
            business_output(v)
        except ContractError as e:
            raise ValueError(str(e)) from None
        return v


def _outputs_of(params: CodeExecParams) -> set[str]:
    name, _ = business_output(params.outputs)
    return {name, *(SYSTEM_OUTPUTS - {"_created_time", "_elapsed_time"})}


@register("CodeExec", CodeExecParams, outputs=_outputs_of)
class CodeExec(Tool):
    function_name = "execute_code"
    tool_description = DESCRIPTION
    thoughts_text = "Running a short script to process data."
    retry_inside = False           # a script that failed once fails again; RAGFlow does not retry it
    args = {
        "lang": ToolArg("string", "The programming language of the code.", required=True,
                        default=None, enum=("python", "javascript")),
        "script": ToolArg("string", "The code. It MUST define a function named main.", required=True, default=None),
    }

    # --- compile time -------------------------------------------------------------------
    def prepare(self) -> None:
        # the script is code, not a template: braces in it are the language's, never references
        self.arg_sources = {}
        self.argument_refs: dict[str, Ref | None] = {
            name: parse_ref(source) if source else None for name, source in self.params.arguments.items()}
        self.business, self.expected = business_output(self.params.outputs)

    def references(self):
        return [(f"params.arguments.{name}", ref) for name, ref in self.argument_refs.items() if ref is not None]

    # --- run time ------------------------------------------------------------------------
    async def run(self, state, ctx) -> Result:
        created = time.perf_counter()
        state, writes = await settle_pending(self, [r for r in self.argument_refs.values() if r], state, ctx)
        inputs = {"lang": self.params.lang, "script": self.params.script}
        outputs, _, _ = await self.call(dict(inputs), ctx, retry=False, state=state)
        if outputs.get("_ERROR"):
            raise ComponentError(self.id, outputs["_ERROR"], {
                "_created_time": created, **outputs, "_elapsed_time": time.perf_counter() - created}, inputs)
        return Result(outputs=outputs, inputs=inputs, writes=writes)

    async def call(self, args: dict, ctx, *, function_name: str | None = None, retry: bool = True,
                   state: Mapping[str, Any] | None = None) -> tuple[dict, dict, str]:
        """One execution: (outputs, reference entries, the text the model reads).

        `state` resolves `arguments`; an Agent that does not pass it leaves them None unless the
        model gave them. Scripted `tool_results` replace the execution.
        """
        scripted = self.scripted_result(ctx, function_name)
        if scripted is not None:
            return scripted
        out = await self.execute_with(args, ctx, state)
        return out.outputs, {"chunks": {}, "doc_aggs": {}}, out.text or ""

    async def execute(self, args: dict, ctx) -> ToolOutput:
        return await self.execute_with(args, ctx, None)

    async def execute_with(self, args: dict, ctx, state: Mapping[str, Any] | None) -> ToolOutput:
        lang = args.get("lang") or self.params.lang
        code = args.get("script") or self.params.script
        arguments = {}
        for name, ref in self.argument_refs.items():
            if args.get(name):
                arguments[name] = args[name]
            elif ref is not None and state is not None:
                try:
                    arguments[name] = resolve(state, ref)
                except ReferenceError_:
                    arguments[name] = None
            else:
                arguments[name] = None
        try:
            policy = CodePolicy.resolve((getattr(ctx, "extras", None) or {}).get("code"))
            execution = await run_code(str(lang), str(code), arguments, policy)
        except (ValueError, CodePolicyError, CodeRefused, SandboxUnavailable) as e:
            return self._failed(str(e))
        if not execution.ok:
            return self._failed(execution.error_message())
        try:
            return self._succeeded(execution, policy, (getattr(ctx, "extras", None) or {}).get("tenant"))
        except ArtifactStoreError as e:
            return self._failed(str(e))

    # --- outputs ---------------------------------------------------------------------------
    def _failed(self, message: str) -> ToolOutput:
        outputs = {"_ERROR": message}
        return ToolOutput(outputs, text=_model_text(outputs))

    def _succeeded(self, execution, policy: CodePolicy, owner: str | None = None) -> ToolOutput:
        value = normalize_value(execution.result if execution.result_present else _read_stdout(execution.stdout))
        outputs: dict[str, Any] = {"_ERROR": "", "raw_result": value, "actual_type": actual_type(value)}
        try:
            check_domain(value)
            check_value(self.expected, value)
            outputs[self.business] = value
        except ContractError as e:
            outputs[self.business] = None
            outputs["_ERROR"] = f"the result does not match output '{self.business}': {e}"
        parts = [canonical_text(value)]
        stored = store_artifacts(execution.artifacts, policy, owner)
        if stored:
            described = attachment_content(execution.artifacts, stored)
            outputs["_ARTIFACTS"] = [{k: a[k] for k in ("name", "url", "mime_type", "size")} for a in stored]
            outputs["_ATTACHMENT_CONTENT"] = described
            outputs["attachments"] = [_markdown(a) for a in outputs["_ARTIFACTS"]]
            parts.append(described)
        else:
            outputs.update({"_ARTIFACTS": None, "_ATTACHMENT_CONTENT": "", "attachments": []})
        outputs["content"] = "\n\n".join(p for p in parts if p).strip()
        return ToolOutput(outputs, text=_model_text(outputs))


def _read_stdout(stdout: str) -> Any:
    """What a script that returned nothing printed: JSON, else a Python literal, else the text."""
    text = (stdout or "").strip()
    if not text:
        return ""
    for parse in (json.loads, ast.literal_eval):
        try:
            return parse(text)
        except Exception:       # literal_eval raises several kinds; any of them means "not this format"
            continue
    return text


def _model_text(outputs: dict[str, Any]) -> str:
    """As a tool, RAGFlow hands the model the component's whole output object, as JSON."""
    return json.dumps(outputs, ensure_ascii=False, default=str)


def _markdown(artifact: Mapping[str, Any]) -> str:
    name, url = artifact.get("name", ""), artifact.get("url", "")
    if str(artifact.get("mime_type") or "").startswith("image/") and url:
        return f"![{name}]({url})"
    return f"[Download {name}]({url})" if url else str(name)


def artifact_markdown(artifacts: list[Mapping[str, Any]] | None, existing_text: str = "") -> str:
    """Markdown for the `_ARTIFACTS` of an Agent's CodeExec calls, to append to its answer (SPEC 7).

    Images become `![name](url)`, other files `[Download name](url)`; an image the answer already
    shows is not repeated.
    """
    parts = []
    for art in artifacts or []:
        if not isinstance(art, Mapping):
            continue
        url = art.get("url", "")
        if url and (f"![]({url})" in existing_text or f"![{art.get('name', '')}]({url})" in existing_text):
            continue
        parts.append(_markdown(art))
    return "\n\n".join(parts)
