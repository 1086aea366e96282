"""Parser (rag/flow/parser/parser.py): a file read by its family's setup, into RAGFlow's output shapes.

`setups` maps a family (pdf, spreadsheet, doc, docx, markdown, text&code, html, slides, image, email,
audio, video, epub) to its suffixes, output format and method. RAGFlow's Python engine reads them from
`params.setups`; its templates (written for its Go engine) put the families at the top of `params`
instead: both are read, `setups` first. A file goes to the first family whose suffixes hold its
extension. MinerU, Docling, PaddleOCR and Tika are called over HTTP when configured, speech-to-text
and vision models through the models config (nodes/pipeline/services.py).
Methods that need RAGFlow's DeepDoc models or a service not configured or not written yet (OCR,
TCADP, OpenDataLoader, SoMark, Mistral OCR, vision models on PDF pages or video) are reported when the DSL compiles, naming the method and what to
configure or run instead; a file that reaches one fails at this component with that message.
"""
from __future__ import annotations

import asyncio
import copy
from typing import Any, Callable

from pydantic import Field, model_validator

from canvas2graph.nodes.pipeline import formats, services
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
    """What a family's setup needs that canvas2graph does not run or reach, or None when it reads the files
    itself or calls a configured service (nodes/pipeline/services.py)."""
    method = str(conf.get("parse_method") or "").strip()
    low = method.lower()
    try:
        if services.client_for(family, conf) is not None:
            return None
    except services.ServiceError as e:     # configured, but not so that it can work
        return str(e)
    if family == "audio" and _asr_model(conf):
        return None                # a speech-to-text model from the models config, called over HTTP
    how = services.what_to_configure(family, conf)
    if how:
        return f"{_needs(family, method, low)} ({how}, as RAGFlow reads it)"
    return _needs(family, method, low)


def _needs(family: str, method: str, low: str) -> str | None:
    if family == "pdf":
        if low == "plain_text":
            return None
        if low == "deepdoc":
            return (f"parse_method '{method}' needs {PDF_SERVICES['deepdoc']}, which RAGFlow runs in its own process "
                    "(DEEPDOC_URL moves only the layout model out; its OCR stays in-process)")
        what = PDF_SERVICES.get(low) or next((v for k, v in PDF_SERVICES.items() if low.endswith("@" + k)), None)
        return f"parse_method '{method}' needs {what or 'a vision model to read pages as images'}"
    if family in ("spreadsheet", "slides") and low == "tcadp parser":
        return f"parse_method '{method}' needs Tencent Cloud's TCADP"
    if family == "image":         # a vision model (any other method) is the models config's, as an LLM's
        return f"parse_method '{method or 'ocr'}' needs DeepDoc's OCR model" if low in ("", "ocr") else None
    if family == "audio":
        return "audio files need a speech-to-text model: name it in vlm.llm_id (as RAGFlow's setup does)"
    if family == "video":
        return "video files need a vision model that reads video, which canvas2graph does not call"
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
        try:
            client = services.client_for(family, conf)
        except services.ServiceError as e:
            raise ValueError(f"{family}: {e}") from None
        if client is not None:
            return await self._by_service(client, family, name, conf, upstream, job)
        need = service_needed(family, conf)
        if need:
            raise ValueError(f"{family}: {need}, which canvas2graph does not run")
        if family == "image":
            return await self._image_by_model(name, conf, job)
        if family == "audio":
            return await self._audio_by_model(name, conf, job)
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

    async def _by_service(self, client, family: str, name: str, conf: dict, upstream: dict, job: Job) -> dict[str, Any]:
        """A file a configured service parses (MinerU, Docling, PaddleOCR: PDFs; TCADP: PDFs, spreadsheets, slides;
        Tika: legacy .doc)."""
        job.progress(0.01, f"Start to work on a {family} file with {client.name} at {client.url}.")
        data = job.read_bytes()
        loop = asyncio.get_running_loop()

        def progress(value: float, message: str) -> None:     # from the client's thread, reported on the loop
            loop.call_soon_threadsafe(job.progress, value, message)
        try:
            if family in ("spreadsheet", "slides"):          # TCADP: RAGFlow's outputs for these families
                out = await asyncio.to_thread(client.office, family, name, data, conf, progress)
            elif family == "pdf":
                boxes = await asyncio.to_thread(client.pdf, name, data, conf, progress)
                out = await asyncio.to_thread(services.pdf_output, boxes, data, conf)
            else:
                out = services.doc_output(await asyncio.to_thread(client.text, name, data, progress), conf)
        except services.ServiceError as e:
            raise ValueError(f"{family}: {e}") from None
        outlines = out.pop("file_outlines", None)
        if outlines is not None:
            out["file"] = {**(upstream.get("file") or {}), **outlines}
        job.progress(0.8, "Finish parsing.")
        return out

    async def _image_by_model(self, name: str, conf: dict, job: Job) -> dict[str, Any]:
        """RAGFlow's `_image` with a vision model (`parse_method` is its id): the picture as JPEG, described
        with RAGFlow's prompt (or the setup's `system_prompt`), one image item."""
        from canvas2graph.nodes.llm import complete
        job.progress(0.01, "Start to work on an image.")
        llm_id = str(conf.get("parse_method"))
        url = await asyncio.to_thread(_jpeg_data_url, name, job.read_bytes())
        prompt = conf.get("system_prompt") or (DESCRIBE_ZH if str(conf.get("lang") or "").lower() == "chinese"
                                                else DESCRIBE_EN)
        text = await complete(llm_id, self.id, [{"role": "user", "content": prompt, "images": [url]}], job.ctx)
        return {"output_format": "json", "json": [{"text": text.strip(), "doc_type_kwd": "image"}]}


    async def _audio_by_model(self, name: str, conf: dict, job: Job) -> dict[str, Any]:
        """RAGFlow's `_audio`: the speech-to-text model `vlm.llm_id` transcribes the file (OpenAI's
        `audio.transcriptions`, at the model's provider as the models config resolves it)."""
        from canvas2graph.runtime.services.models import ModelConfigError
        job.progress(0.01, "Start to work on an audio.")
        llm_id = _asr_model(conf)
        if job.ctx.models is None:
            raise ValueError(f"audio: no models are configured for this run to reach {llm_id}")
        try:
            text = await asyncio.to_thread(services.transcribe, job.ctx.models, llm_id, self.id, name, job.read_bytes())
        except ModelConfigError as e:
            raise ValueError(f"audio: {e}") from None
        except services.ServiceError as e:
            raise ValueError(f"audio: {e}") from None
        return {"output_format": conf.get("output_format") or "text", "text": text}


def _asr_model(conf: dict) -> str:
    vlm = conf.get("vlm")
    return str(vlm.get("llm_id") or "").strip() if isinstance(vlm, dict) else ""


# rag/llm/cv_model.py Base.prompt: what a vision model is asked about a picture
DESCRIBE_EN = ("Please describe the content of this picture, like where, when, who, what happen. "
               "If it has number data, please extract them out.")
DESCRIBE_ZH = "请用中文详细描述一下图中的内容，比如时间，地点，人物，事情，人物心情等，如果有数据请提取出数据。"


def _jpeg_data_url(name: str, data: bytes) -> str:
    """The picture as RAGFlow sends it: converted to RGB, saved as JPEG, a data URL."""
    import base64
    import io
    from PIL import Image, UnidentifiedImageError
    try:
        img = Image.open(io.BytesIO(data)).convert("RGB")
    except (UnidentifiedImageError, OSError) as e:
        raise ValueError(f"{name} is not an image Pillow can read: {e}") from None
    out = io.BytesIO()
    img.save(out, format="JPEG")
    return "data:image/jpeg;base64," + base64.b64encode(out.getvalue()).decode("ascii")
