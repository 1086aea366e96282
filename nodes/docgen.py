"""DocGenerator: Markdown content (with references) to a PDF, DOCX, TXT, Markdown or HTML file (SPEC 3.16).

The content's `{component@output}` and `{sys.x}` references are filled in (an LLM's pending answer is
generated first; a reasoning model's <think> blocks are dropped), then `canvas2graph.nodes.documents` writes the
file with the layout params: `header_text`, `footer_text`, `watermark_text`, `add_page_numbers`,
`add_timestamp` and `font_size` (at least 12; headings 6, 4 and 2 points larger). The file is kept as
CodeExec's artifacts are (the run's code policy says where; `serve` links and serves them at
`/api/v1/documents/artifact/<name>`).

Outputs, as RAGFlow's: `doc_id`, `filename`, `mime_type`, `size` and `download`, a JSON string with
the same plus the file in `base64` and its `preview_url` (here the artifact's link). A Message that
shows `download` offers the file in `message_end.downloads` instead of printing it.
"""
from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import uuid
from datetime import datetime
from typing import Any

from pydantic import Field, field_validator

from canvas2graph.nodes.base import Node, Params, Result, settle_pending
from canvas2graph.nodes.documents import FORMATS, Layout, render, strip_thinking
from canvas2graph.nodes.downloads import shown_text
from canvas2graph.nodes.registry import register
from canvas2graph.nodes.tools._web import one_of
from canvas2graph.runtime.graph.values import ReferenceError_, resolve

_UNSAFE = re.compile(r'[\\/\x00-\x1f?#%*:|<>"]')


class DocGeneratorParams(Params):
    output_format: str = "pdf"
    content: str = ""
    filename: str | None = ""
    header_text: str | None = ""
    footer_text: str | None = ""
    watermark_text: str | None = ""
    add_page_numbers: bool = True
    add_timestamp: bool = True
    include_download_info_in_content: bool = False
    font_size: int = 12
    outputs: Any = Field(default_factory=lambda: {
        "doc_id": {"value": "", "type": "string"}, "filename": {"value": "", "type": "string"},
        "mime_type": {"value": "", "type": "string"}, "size": {"value": 0, "type": "number"},
        "download": {"value": "", "type": "string"}})

    _format = one_of("output_format", tuple(FORMATS))

    @field_validator("content", mode="before")
    @classmethod
    def _content(cls, v: Any) -> Any:
        if v is None or (isinstance(v, str) and not v.strip()):
            raise ValueError("content is empty: give the Markdown text (references allowed) to put in the document")
        return v if isinstance(v, str) else str(v)

    @field_validator("font_size")
    @classmethod
    def _font_size(cls, v: int) -> int:
        if v < 12:
            raise ValueError(f"font_size must be at least 12, not {v}")
        return v


OUTPUTS = {"doc_id", "filename", "mime_type", "size", "download"}


@register("DocGenerator", DocGeneratorParams, outputs=lambda p: OUTPUTS)
class DocGenerator(Node):
    def prepare(self) -> None:
        self.template = self.text_template(self.params.content)

    def references(self):
        return [("params.content", r) for r in self.template.refs]

    def thoughts(self, state) -> str:
        return f"Generating a {self.params.output_format.upper()} document from Markdown..."

    async def run(self, state, ctx) -> Result:
        state, writes = await settle_pending(self, self.template.refs, state, ctx)
        p = self.params
        content = strip_thinking(self._content(state))
        extension, mime_type = FORMATS[p.output_format]
        filename = output_filename(p.filename, extension)
        layout = Layout(title=os.path.splitext(filename)[0], header=p.header_text or "", footer=p.footer_text or "",
                        watermark=p.watermark_text or "", page_numbers=p.add_page_numbers, font_size=p.font_size,
                        timestamp=f"Generated: {datetime.now():%Y-%m-%d %H:%M:%S}" if p.add_timestamp else "")
        try:
            data = await asyncio.to_thread(render, p.output_format, content, layout)
        except Exception as e:       # a writer failing on odd content: say which format and why
            raise RuntimeError(f"Document generation failed: {p.output_format.upper()} generation failed: {e}") from e
        if not data:
            raise RuntimeError("Document generation failed: the document is empty (the content resolved to nothing)")
        from canvas2graph.runtime.services.sandbox import CodePolicy, store_document
        extras = getattr(ctx, "extras", None) or {}
        stored = store_document(filename, data, mime_type, CodePolicy.resolve(extras.get("code")), extras.get("tenant"))
        doc_id = stored["url"].rstrip("/").rsplit("/", 1)[-1].split(".")[0]
        info = {"doc_id": doc_id, "filename": filename, "mime_type": mime_type, "size": len(data),
                "base64": base64.b64encode(data).decode("ascii"), "preview_url": stored["url"],
                "include_download_info_in_content": p.include_download_info_in_content}
        outputs = {"doc_id": doc_id, "filename": filename, "mime_type": mime_type, "size": len(data),
                   "download": json.dumps(info)}
        return Result(outputs=outputs, writes=writes)

    def _content(self, state) -> str:
        """The content with each reference replaced by its text, as RAGFlow substitutes them (a value that
        cannot be read becomes an [ERROR: ...] marker in the text)."""
        parts = []
        for part in self.template.exact:
            if isinstance(part, str):
                parts.append(part)
                continue
            try:
                value = resolve(state, part)
            except ReferenceError_ as e:
                parts.append(f"[ERROR: {e}]")
                continue
            parts.append(shown_text(value))
        return "".join(parts)


def output_filename(name: str | None, extension: str) -> str:
    """The file's name: the `filename` param made safe (no path separators or reserved characters, at
    most 180 characters) with the format's extension, or `document_<time>_<random>.<ext>`."""
    name = (name or "").strip()
    if not name:
        return f"document_{datetime.now():%Y%m%d_%H%M%S}_{uuid.uuid4().hex[:8]}.{extension}"
    name = re.sub(r"\s+", " ", _UNSAFE.sub(" ", name)).strip(" .")
    base = os.path.splitext(name)[0][:180].rstrip() or "file"
    return f"{base}.{extension}"
