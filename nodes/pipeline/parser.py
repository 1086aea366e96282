"""Parser (rag/flow/parser/parser.py): a file read by its family's setup, into RAGFlow's output shapes.

`setups` maps a family (pdf, spreadsheet, doc, docx, markdown, text&code, html, slides, image, email,
audio, video, epub) to its suffixes, output format and method. RAGFlow's Python engine reads them from
`params.setups`; its templates (written for its Go engine) put the families at the top of `params`
instead: both are read, `setups` first. A file goes to the first family whose suffixes hold its
extension. Methods that need RAGFlow's DeepDoc models or an outside service (OCR, MinerU, Docling,
PaddleOCR, TCADP, vision and speech models, Tika) are reported when the DSL compiles, naming the
method and what would run instead; a file that reaches one fails at this component with that message.
"""
from __future__ import annotations

import asyncio
import copy
from typing import Any, Callable

from pydantic import Field, model_validator

from canvas2graph.nodes.pipeline import formats
from canvas2graph.nodes.pipeline.base import Job, PipelineNode, PipelineParams
from canvas2graph.nodes.registry import register_pipeline

ALLOWED_FORMATS = {
    "pdf": ["json", "markdown"], "spreadsheet": ["json", "markdown", "html"], "doc": ["json", "markdown"],
    "docx": ["json", "markdown"], "slides": ["json"], "image": ["json"], "email": ["text", "json"],
    "markdown": ["text", "json"], "text&code": ["text", "json"], "html": ["text", "json"], "audio": ["json"],
    "video": [], "epub": ["text", "json"],
}

# the families whose output_format RAGFlow's ParserParam.check() validates
CHECKED_FORMATS = ("pdf", "spreadsheet", "doc", "docx", "slides", "markdown", "text&code", "html", "email", "epub")

DEFAULT_SETUPS: dict[str, dict[str, Any]] = {
    "pdf": {"parse_method": "deepdoc", "lang": "Chinese", "suffix": ["pdf"], "output_format": "json"},
    "spreadsheet": {"parse_method": "deepdoc", "output_format": "html", "suffix": ["xls", "xlsx", "csv"]},
    "doc": {"suffix": ["doc"], "output_format": "json"},
    "docx": {"suffix": ["docx"], "output_format": "json"},
    "markdown": {"suffix": ["md", "markdown", "mdx"], "output_format": "json"},
    "text&code": {"suffix": ["txt", "py", "js", "java", "c", "cpp", "h", "php", "go", "ts", "sh", "cs", "kt", "sql"],
                  "output_format": "json"},
    "html": {"suffix": ["htm", "html"], "output_format": "json"},
    "slides": {"parse_method": "deepdoc", "suffix": ["pptx", "ppt"], "output_format": "json"},
    "image": {"parse_method": "ocr", "suffix": ["jpg", "jpeg", "png", "gif"], "output_format": "json"},
    "email": {"suffix": ["eml", "msg"], "fields": formats.EMAIL_FIELDS, "output_format": "json"},
    "audio": {"suffix": ["da", "wave", "wav", "mp3", "aac", "flac", "ogg", "aiff", "au", "midi", "wma", "realaudio",
                         "vqf", "oggvorbis", "ape"], "output_format": "text"},
    "video": {"suffix": ["mp4", "avi", "mkv"], "output_format": "text"},
    "epub": {"suffix": ["epub"], "output_format": "json"},
}

Reader = Callable[[str, bytes, dict], dict]
LOCAL: dict[str, Reader] = {
    "text&code": formats.text_and_code, "markdown": formats.markdown, "html": formats.html, "docx": formats.docx,
    "spreadsheet": formats.spreadsheet, "slides": formats.slides, "epub": formats.epub, "email": formats.email_message,
}
PDF_SERVICES = {
    "deepdoc": "RAGFlow's DeepDoc layout and OCR models", "mineru": "a MinerU server",
    "docling": "a Docling server", "opendataloader": "an OpenDataLoader server", "tcadp parser": "Tencent Cloud's TCADP",
    "paddleocr": "a PaddleOCR server", "somark": "a SoMark server", "mistral ocr": "Mistral's OCR API",
}


def service_needed(family: str, conf: dict) -> str | None:
    """What a family's setup needs that canvas2graph does not run, or None when it reads it itself."""
    method = str(conf.get("parse_method") or "").strip()
    low = method.lower()
    if family == "pdf":
        if low == "plain_text":
            return None
        what = PDF_SERVICES.get(low) or next((v for k, v in PDF_SERVICES.items() if low.endswith("@" + k)), None)
        return f"parse_method '{method}' needs {what or 'a vision model to read pages as images'}"
    if family in ("spreadsheet", "slides") and low == "tcadp parser":
        return f"parse_method '{method}' needs Tencent Cloud's TCADP"
    if family == "image":
        return f"parse_method '{method or 'ocr'}' needs {'an OCR model' if low in ('', 'ocr') else 'a vision model'}"
    if family in ("audio", "video"):
        return f"{family} files need a {'speech' if family == 'audio' else 'vision'} model to turn them into text"
    if family == "doc":
        return "legacy .doc files need an Apache Tika server"
    return None


class ParserParams(PipelineParams):
    setups: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _families(self) -> "ParserParams":
        given = self.setups or {k: v for k, v in (self.model_extra or {}).items()
                                if isinstance(v, dict) and isinstance(v.get("suffix"), list)}
        merged = copy.deepcopy(given) if given else copy.deepcopy(DEFAULT_SETUPS)
        for family, conf in merged.items():
            if not isinstance(conf, dict):
                raise ValueError(f"setups.{family} must be an object")
            fmt = conf.get("output_format", "")
            if family in CHECKED_FORMATS and fmt not in ALLOWED_FORMATS[family]:
                raise ValueError(f"setups.{family}.output_format {fmt!r} abnormal: one of "
                                 f"{', '.join(ALLOWED_FORMATS[family])}")
        self.setups = merged
        return self


@register_pipeline("Parser", ParserParams, outputs=lambda p: {"output_format", "json", "markdown", "text", "html",
                                                              "name", "file"})
class Parser(PipelineNode):
    def warnings(self) -> list[tuple[str, str, str]]:
        out = []
        for family, conf in self.params.setups.items():
            if family not in ALLOWED_FORMATS:
                out.append(("unknown-family", f"'{family}' is not a file family RAGFlow's Parser reads "
                            f"({', '.join(ALLOWED_FORMATS)}): files with its suffixes fail", f"params.setups.{family}"))
                continue
            need = service_needed(family, conf)
            if need:
                what = "parse_method 'plain_text' reads their text without OCR" if family == "pdf" else \
                    "RAGFlow itself can parse them"
                out.append(("needs-service", f"{family}: {need}, which canvas2graph does not run: such files fail "
                            f"at this Parser ({what})", f"params.setups.{family}"))
        return out

    def family_of(self, name: str) -> tuple[str, dict] | None:
        suffix = name.rsplit(".", 1)[-1].lower() if "." in name else ""
        for family, conf in self.params.setups.items():
            if suffix in [str(s).lower() for s in conf.get("suffix") or []]:
                return family, conf
        return None

    async def process(self, upstream: dict[str, Any], job: Job) -> dict[str, Any]:
        name = upstream.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError("Input error: name is required")
        found = self.family_of(name)
        if found is None:
            raise ValueError(f"No suitable for file extension: `.{name.rsplit('.', 1)[-1].lower()}`")
        family, conf = found
        need = service_needed(family, conf)
        if need:
            raise ValueError(f"{family}: {need}, which canvas2graph does not run")
        reader = formats.pdf_plain_text if family == "pdf" else LOCAL.get(family)
        if reader is None:
            raise ValueError(f"'{family}' is not a file family RAGFlow's Parser reads")
        job.progress(0.01, f"Start to work on a {family} file.")
        data = job.read_bytes()
        out = await asyncio.to_thread(reader, name, data, conf)
        outlines = out.pop("file_outlines", None)
        if outlines is not None:
            out["file"] = {**(upstream.get("file") or {}), **outlines}
        job.progress(0.8, "Finish parsing.")
        return out
