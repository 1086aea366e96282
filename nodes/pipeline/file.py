"""File (rag/flow/file.py): the pipeline's start, naming the file the run is about.

RAGFlow's File outputs the document's `name` and the `file` record; here the record is the one the
run was started with (`{"name", "path", "size", "sha256"}`), which the Parser reads the bytes from.
"""
from __future__ import annotations

from typing import Any

from canvas2graph.nodes.pipeline.base import Job, PipelineNode, PipelineParams
from canvas2graph.nodes.registry import register_pipeline


class FileParams(PipelineParams):
    pass


@register_pipeline("File", FileParams, outputs=lambda p: {"name", "file"})
class File(PipelineNode):
    async def process(self, upstream: dict[str, Any], job: Job) -> dict[str, Any]:
        if not job.file.get("name"):
            raise ValueError("no file was given to the pipeline")
        job.progress(1, "File fetched.")
        return {"name": job.file["name"], "file": dict(job.file)}
