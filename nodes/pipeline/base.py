"""What every ingestion-pipeline component shares (RAGFlow's rag/flow/base.py `ProcessBase`).

A pipeline component gets the outputs of the component before it (RAGFlow calls
`invoke(**last_cpn.output())`), keeps them among its own outputs (RAGFlow's `invoke` sets every
keyword it receives as an output, which is how `name` and `file` travel down the chain), adds what it
makes, and reports progress through a callback: `(progress, message)`, progress in [0, 1], -1 for an
error. The graph step around it (`compiler/pipeline_build.py`) stamps `_created_time` and
`_elapsed_time`, turns an exception into `_ERROR` and stops the file there, as RAGFlow's Pipeline does.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from pydantic import Field

from canvas2graph.nodes.base import Node, Params

if TYPE_CHECKING:
    from canvas2graph.types import RunContext

Progress = Callable[[float, str], None]


class PipelineParams(Params):
    """ProcessParamBase: a component's time budget (RAGFlow's default is effectively none)."""

    timeout: float = Field(100000000, gt=0)
    persist_logs: bool = True


@dataclass
class Job:
    """One file's run through the pipeline, as a component sees it."""

    ctx: "RunContext"
    file: dict[str, Any]                       # {"name", "path", "size", "sha256"}
    outputs: dict[str, dict[str, Any]]         # every component's outputs so far (Extractor reads them by ref)
    progress: Progress
    kb: dict[str, Any] = field(default_factory=dict)   # the dataset: {"id", "embd_id"}

    def read_bytes(self) -> bytes:
        """The file's bytes, from where the run was given them."""
        path = self.file.get("path")
        if not path:
            raise ValueError(f"{self.file.get('name', 'the file')}: no stored copy to read")
        try:
            return Path(path).read_bytes()
        except OSError as e:
            raise ValueError(f"cannot read {self.file.get('name') or path}: {e.strerror}") from None


class PipelineNode(Node):
    """A pipeline component: compile-time checks as any Node, and `process` at run time."""

    canvas_kind = "pipeline"

    def warnings(self) -> list[tuple[str, str, str]]:
        """(code, message, field) of what this component cannot do here (a service left unconfigured)."""
        return []

    async def process(self, upstream: dict[str, Any], job: Job) -> dict[str, Any]:
        """The outputs this component adds to the upstream's (which it keeps, as RAGFlow does)."""
        raise NotImplementedError

    async def run(self, state, ctx):        # pipeline components run through `process`, never as agent nodes
        raise NotImplementedError("a pipeline component runs in a pipeline graph")


def text_of_item(item: dict[str, Any]) -> str:
    """An upstream JSON item's text: `text`, else `content_with_weight` (RAGFlow accepts either)."""
    text = item.get("text")
    if not isinstance(text, str):
        text = item.get("content_with_weight")
    return text if isinstance(text, str) else ""
