"""Parse services the Parser calls over HTTP, configured as RAGFlow configures them.

RAGFlow's Parser hands some files to a service instead of reading them itself. canvas2graph speaks
the same protocols to the same services, configured by the same environment variables:

| method | configured by | request | reply |
|---|---|---|---|
| pdf `mineru` (or `<name>@MinerU`) | `MINERU_APISERVER` (`MINERU_BACKEND`, `MINERU_SERVER_URL`) | `POST /file_parse`, multipart `files` and RAGFlow's form fields | a zip holding `<stem>_content_list.json` |
| pdf `docling` | `DOCLING_SERVER_URL` | `POST /v1/convert/source` (then `/v1alpha`, then without chunking), the PDF as base64 | `{"document": {"md_content", ...}}` or chunks |
| pdf `paddleocr` (or `<name>@PaddleOCR`) | `PADDLEOCR_ACCESS_TOKEN` (`PADDLEOCR_BASE_URL`, `PADDLEOCR_ALGORITHM`) | `POST /api/v2/ocr/jobs` (multipart `file`, `model`, `optionalPayload`), then polls the job | the job's JSON-lines result: layout blocks with labels and boxes |
| pdf, spreadsheet, slides `TCADP Parser` | `TCADP_SECRET_ID`, `TCADP_SECRET_KEY` (`TCADP_REGION`, `TCADP_ENDPOINT`) | Tencent Cloud's `ReconstructDocumentSSE`, TC3-signed, the file as base64 (`tcadp.py`) | server-sent events, the last naming a zip of JSON blocks and Markdown |
| doc (legacy Word) | `TIKA_SERVER_ENDPOINT` (tika-python's variable) | `PUT /rmeta/text`, the file as the body | `[{"X-TIKA:content": ...}, ...]` |

What each gives back becomes the boxes RAGFlow's Parser makes of it (deepdoc/parser/mineru_parser.py,
docling_parser.py; rag/flow/parser/parser.py `_pdf`, `_doc`): text, `layout_type` and, from MinerU,
`positions` (`[[page, left, right, top, bottom]]` in PDF points, as RAGFlow computes them from
MinerU's 0-1000 boxes and the page size). Page crops (`image`) are not made: canvas2graph does not
render PDF pages. A service that cannot be reached, answers with an error or with something else
than its protocol's reply fails the file with a message naming the service, its URL and what went wrong.
"""
from __future__ import annotations

import base64
import io
import json
import os
import re
import zipfile
from pathlib import PurePosixPath
from typing import Any, Callable, Mapping

Progress = Callable[[float, str], None]

TIMEOUT_S = 1800.0          # RAGFlow's MinerU timeout; Docling's default is 600
LANGUAGE_TO_MINERU = {
    "English": "en", "Chinese": "ch", "Traditional Chinese": "chinese_cht", "Russian": "east_slavic",
    "Ukrainian": "east_slavic", "Indonesian": "latin", "Spanish": "latin", "Vietnamese": "latin", "Japanese": "japan",
    "Korean": "korean", "Portuguese BR": "latin", "German": "latin", "French": "latin", "Italian": "latin",
    "Tamil": "ta", "Telugu": "te", "Kannada": "ka", "Thai": "th", "Greek": "el", "Hindi": "devanagari",
    "Bulgarian": "cyrillic", "Turkish": "latin",
}
MINERU_BACKENDS = ("pipeline", "vlm-http-client", "vlm-transformers", "vlm-vllm-engine", "vlm-mlx-engine",
                   "vlm-vllm-async-engine", "vlm-lmdeploy-engine")
MINERU_SKIPPED = ("header", "footer", "page_number", "discarded")


class ServiceError(ValueError):
    """A parse service failed: the message names the service, its URL and what went wrong."""


def _post_error(service: str, url: str, e: Exception) -> ServiceError:
    import httpx
    if isinstance(e, httpx.HTTPStatusError):
        body = e.response.text[:300].strip()
        return ServiceError(f"{service} at {url} answered HTTP {e.response.status_code}" + (f": {body}" if body else ""))
    return ServiceError(f"{service} at {url} cannot be reached: {e.__class__.__name__}: {e}")


class Service:
    name = ""
    env = ""            # the variable that configures it (its URL, unless the class says otherwise)
    url = ""

    def __init__(self, url: str, environ: Mapping[str, str]):
        self.url = url.rstrip("/")
        self.environ = environ

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> "Service | None":
        url = (environ.get(cls.env) or "").strip()
        return cls(url, environ) if url else None

    @classmethod
    def how(cls) -> str:
        return f"set {cls.env} to the {cls.name} server's URL"


# --- MinerU ---------------------------------------------------------------------------------------
class MinerU(Service):
    name, env = "MinerU", "MINERU_APISERVER"

    def __init__(self, url: str, environ: Mapping[str, str]):
        super().__init__(url, environ)
        self.backend = environ.get("MINERU_BACKEND") or "pipeline"
        self.server_url = environ.get("MINERU_SERVER_URL") or ""
        if self.backend not in MINERU_BACKENDS:
            raise ServiceError(f"MINERU_BACKEND '{self.backend}' is not a MinerU backend: one of "
                               f"{', '.join(MINERU_BACKENDS)}")
        if self.backend == "vlm-http-client" and not self.server_url:
            raise ServiceError("MINERU_BACKEND vlm-http-client needs MINERU_SERVER_URL (the vLLM server MinerU calls)")

    def form(self, conf: dict) -> dict[str, str]:
        """RAGFlow's form fields (requests writes booleans as True/False and leaves out None)."""
        data = {"output_dir": "./output", "lang_list": LANGUAGE_TO_MINERU.get(conf.get("lang") or "Chinese", "ch"),
                "backend": self.backend, "parse_method": "auto", "formula_enable": "True", "table_enable": "True",
                "return_md": "True", "return_middle_json": "True", "return_model_output": "True",
                "return_content_list": "True", "return_images": "True", "response_format_zip": "True",
                "start_page_id": "0", "end_page_id": "99999"}
        if self.server_url:
            data["server_url"] = self.server_url
        return data

    def pdf(self, name: str, data: bytes, conf: dict, progress: Progress) -> list[dict[str, Any]]:
        import httpx
        stem = PurePosixPath(name).stem.replace(" ", "")
        url = f"{self.url}/file_parse"
        progress(0.2, f"[MinerU] invoke api: {url}")
        try:
            with httpx.Client(timeout=TIMEOUT_S) as client:
                response = client.post(url, data=self.form(conf), headers={"Accept": "application/json"},
                                       files={"files": (stem + ".pdf", data, "application/pdf")})
                response.raise_for_status()
        except httpx.HTTPError as e:
            raise _post_error("MinerU", url, e) from None
        kind = response.headers.get("content-type", "")
        if not kind.startswith("application/zip"):
            raise ServiceError(f"MinerU at {url} did not return a zip (it returned {kind or 'no content type'}): "
                               "RAGFlow asks for response_format_zip")
        outputs = self.content_list(response.content, stem, url)
        progress(0.75, f"[MinerU] Parsed {len(outputs)} blocks from PDF.")
        sizes = page_sizes(data)
        boxes = []
        for out in outputs:
            section = self.section(out)
            if not section:
                continue
            box: dict[str, Any] = {"text": section, "layout_type": out.get("type") or "text"}
            page = out.get("page_idx")
            if isinstance(page, int) and isinstance(out.get("bbox"), list) and len(out["bbox"]) >= 4:
                x0, top, x1, bott = _page_space(out["bbox"], sizes[page] if 0 <= page < len(sizes) else None)
                box["positions"] = [[page + 1, round(x0, 1), round(x1, 1), round(top, 1), round(bott, 1)]]
            boxes.append(box)
        return boxes

    @staticmethod
    def content_list(blob: bytes, stem: str, url: str) -> list[dict[str, Any]]:
        """The `*_content_list.json` in MinerU's zip (read in memory: no member is written anywhere)."""
        try:
            with zipfile.ZipFile(io.BytesIO(blob)) as z:
                names = [n for n in z.namelist() if n.endswith("_content_list.json") or n.rsplit("/", 1)[-1] == "content_list.json"]
                if not names:
                    raise ServiceError(f"MinerU at {url} returned a zip without a content list (*_content_list.json)")
                names.sort(key=lambda n: (f"{stem}_content_list.json" not in n, len(n)))
                found = json.loads(z.read(names[0]).decode("utf-8"))
        except zipfile.BadZipFile:
            raise ServiceError(f"MinerU at {url} returned a broken zip") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ServiceError(f"MinerU at {url} returned a content list that is not JSON: {e}") from None
        if not isinstance(found, list):
            raise ServiceError(f"MinerU at {url} returned a content list that is not a list of blocks")
        return [o for o in found if isinstance(o, dict)]

    @staticmethod
    def section(out: dict[str, Any]) -> str:
        """A block's text as RAGFlow's MinerUParser._transfer_to_sections makes it (tables kept as HTML)."""
        kind = out.get("type")

        def joined(key: str, sep: str) -> str:
            value = out.get(key) or []
            return sep.join(str(v) for v in value) if isinstance(value, list) else str(value)
        if kind in ("text", "equation"):
            return str(out.get("text") or "")
        if kind == "table":
            section = str(out.get("table_body") or "") + joined("table_caption", "\n") + joined("table_footnote", "\n")
            return section if section.strip() else "FAILED TO PARSE TABLE"
        if kind == "image":
            return joined("image_caption", "") + "\n" + joined("image_footnote", "")
        if kind == "code":
            return str(out.get("code_body") or "") + joined("code_caption", "\n")
        if kind == "list":
            return joined("list_items", "\n")
        return ""           # header, footer, page_number, discarded and unknown blocks


def _page_space(bbox: list, size: tuple[float, float] | None) -> tuple[float, float, float, float]:
    """MinerU's 0-1000 box on the page in points (RAGFlow scales by the page image at 72 dpi)."""
    x0, top, x1, bott = (float(v) for v in bbox[:4])
    x0, x1 = min(x0, x1), max(x0, x1)
    top, bott = min(top, bott), max(top, bott)
    if size:
        w, h = size
        x0, x1, top, bott = x0 / 1000 * w, x1 / 1000 * w, top / 1000 * h, bott / 1000 * h
    return x0, top, x1, bott


def page_sizes(data: bytes) -> list[tuple[float, float]]:
    from pypdf import PdfReader
    try:
        return [(float(p.cropbox.width), float(p.cropbox.height)) for p in PdfReader(io.BytesIO(data)).pages]
    except Exception:       # noqa: BLE001 - a PDF pypdf cannot read: the service may still; boxes stay unscaled
        return []


# --- Docling --------------------------------------------------------------------------------------
class Docling(Service):
    name, env = "Docling", "DOCLING_SERVER_URL"

    def payloads(self, filename: str, data: bytes) -> list[tuple[str, dict, bool]]:
        b64 = base64.b64encode(data).decode("ascii")
        standard = {"from_formats": ["pdf"], "to_formats": ["json", "md", "text"]}
        chunking = {**standard, "do_chunking": True,
                    "chunking_options": {"max_tokens": 512, "overlap": 50, "tokenizer": "sentencepiece"}}
        v1 = [{"kind": "file", "filename": filename, "base64_string": b64}]
        alpha = [{"filename": filename, "base64_string": b64}]
        return [("/v1/convert/source", {"options": chunking, "sources": v1}, True),
                ("/v1alpha/convert/source", {"options": chunking, "file_sources": alpha}, True),
                ("/v1/convert/source", {"options": standard, "sources": v1}, False),
                ("/v1alpha/convert/source", {"options": standard, "file_sources": alpha}, False)]

    def pdf(self, name: str, data: bytes, conf: dict, progress: Progress) -> list[dict[str, Any]]:
        import httpx
        progress(0.2, f"[Docling] Requesting external server: {self.url}")
        errors: list[str] = []
        reply, chunked = None, False
        with httpx.Client(timeout=600.0) as client:
            for path, payload, asks_chunks in self.payloads(PurePosixPath(name).name or "input.pdf", data):
                try:
                    response = client.post(self.url + path, json=payload)
                except httpx.HTTPError as e:
                    errors.append(f"{path}: {e.__class__.__name__}: {e}")
                    continue
                if response.status_code < 300:
                    try:
                        reply = response.json()
                    except ValueError:
                        errors.append(f"{path}: the reply is not JSON")
                        continue
                    chunked = asks_chunks and _looks_like_chunks(reply)
                    break
                if not asks_chunks:         # a rejected chunking request falls back quietly, as in RAGFlow
                    errors.append(f"{path}: HTTP {response.status_code} {response.text[:300]}")
        if reply is None:
            raise ServiceError(f"Docling at {self.url}: the conversion failed: " + " | ".join(errors))
        texts: list[str] = []
        if chunked:
            for item in reply if isinstance(reply, list) else reply.get("results") or reply.get("chunks") or []:
                if isinstance(item, dict):
                    text = item.get("text") or ((item.get("chunk") or {}).get("text") if isinstance(item.get("chunk"), dict) else "")
                    if isinstance(text, str) and text.strip():
                        texts.append(text.strip())
        if not texts:
            docs = _documents(reply)
            if not docs:
                raise ServiceError(f"Docling at {self.url}: the reply holds no converted document")
            for doc in docs:
                md, txt = doc.get("md_content"), doc.get("text_content")
                if isinstance(md, str) and md.strip():
                    texts.append(md.strip())
                elif isinstance(txt, str) and txt.strip():
                    texts.append(txt.strip())
                fallback = (doc.get("json_content") or {}).get("md_content") if isinstance(doc.get("json_content"), dict) else None
                if isinstance(fallback, str) and fallback.strip() and not texts:
                    texts.append(fallback.strip())
        progress(0.95, f"[Docling] Remote sections: {len(texts)}")
        return [{"text": t, "layout_type": "text"} for t in texts]


def _looks_like_chunks(payload: Any) -> bool:
    if isinstance(payload, list):
        return bool(payload)
    return isinstance(payload, dict) and any(isinstance(payload.get(k), list) and payload[k] for k in ("results", "chunks"))


def _documents(payload: Any) -> list[dict[str, Any]]:
    if not isinstance(payload, dict):
        return []
    if isinstance(payload.get("document"), dict):
        return [payload["document"]]
    if isinstance(payload.get("documents"), list):
        return [d for d in payload["documents"] if isinstance(d, dict)]
    out = []
    for it in payload.get("results") or [] if isinstance(payload.get("results"), list) else []:
        if isinstance(it, dict):
            out.append(it["document"] if isinstance(it.get("document"), dict)
                       else it["result"] if isinstance(it.get("result"), dict) else it)
    return out


# --- PaddleOCR ------------------------------------------------------------------------------------
PADDLE_REMOVE_IMAGES = re.compile(r"<div[^>]*>\s*<img[^>]*/>\s*</div>|<img[^>]*/>", re.IGNORECASE | re.DOTALL)
PADDLE_ZOOMIN = 2
PADDLE_DEFAULT_URL = "https://paddleocr.aistudio-app.com"


class PaddleOCR(Service):
    """PaddleOCR's job API as RAGFlow's PaddleOCRParser uses it: submit, poll, fetch the JSONL result."""
    name, env = "PaddleOCR", "PADDLEOCR_ACCESS_TOKEN"
    timeout = 600.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> "PaddleOCR | None":
        token = (environ.get("PADDLEOCR_ACCESS_TOKEN") or "").strip()
        if not token:              # RAGFlow's check_installation: no token, no PaddleOCR
            return None
        url = (environ.get("PADDLEOCR_BASE_URL") or environ.get("PADDLEOCR_API_URL") or PADDLE_DEFAULT_URL).strip()
        return cls(url, environ)

    @classmethod
    def how(cls) -> str:
        return "set PADDLEOCR_ACCESS_TOKEN (and PADDLEOCR_BASE_URL for a server other than PaddleOCR's cloud)"

    def pdf(self, name: str, data: bytes, conf: dict, progress: Progress) -> list[dict[str, Any]]:
        import time
        import httpx
        token = self.environ.get("PADDLEOCR_ACCESS_TOKEN", "").strip()
        algorithm = (self.environ.get("PADDLEOCR_ALGORITHM") or "PaddleOCR-VL").strip()
        headers = {"Client-Platform": "ragflow", "Authorization": f"Bearer {token}"}
        jobs = f"{self.url}/api/v2/ocr/jobs"
        deadline = time.monotonic() + self.timeout
        payload = {"prettifyMarkdown": True, "showFormulaNumber": True, "visualize": False}
        progress(0.1, "[PaddleOCR] submitting request")
        with httpx.Client(timeout=60.0) as client:
            try:
                resp = client.post(jobs, data={"model": algorithm, "optionalPayload": json.dumps(payload)},
                                   files={"file": ("document.pdf", data)}, headers=headers)
            except httpx.HTTPError as e:
                raise _post_error("PaddleOCR", jobs, e) from None
            if resp.status_code != 200:
                raise ServiceError(f"PaddleOCR at {jobs}: the submission answered HTTP {resp.status_code}: {resp.text[:300]}")
            submitted = _json(resp, "PaddleOCR", jobs)
            job = (submitted.get("data") or {}).get("jobId") or submitted.get("jobId")
            if not job:
                raise ServiceError(f"PaddleOCR at {jobs}: no job id in the submission's reply")
            progress(0.2, f"[PaddleOCR] job submitted: {job}")
            poll, interval = f"{jobs}/{job}", 3.0
            while True:
                try:
                    resp = client.get(poll, headers=headers)
                except httpx.HTTPError as e:
                    raise _post_error("PaddleOCR", poll, e) from None
                if resp.status_code != 200:
                    raise ServiceError(f"PaddleOCR at {poll}: polling answered HTTP {resp.status_code}: {resp.text[:200]}")
                polled = _json(resp, "PaddleOCR", poll)
                info = polled.get("data") or {}
                state = info.get("state") or polled.get("state")
                if state == "done":
                    break
                if state == "failed":
                    raise ServiceError(f"PaddleOCR job {job} failed: {info.get('errorMsg', 'Unknown error')}")
                if time.monotonic() + interval > deadline:
                    raise ServiceError(f"PaddleOCR job {job} did not finish within {self.timeout:g} s")
                time.sleep(interval)
                interval = min(interval * 1.5, 15.0)
            progress(0.7, "[PaddleOCR] job done, fetching result")
            result_url = info.get("resultJsonUrl") or (info.get("resultUrl") or {}).get("jsonUrl")
            if not result_url:
                raise ServiceError(f"PaddleOCR job {job} is done but names no result URL")
            try:
                resp = client.get(result_url)
                resp.raise_for_status()
            except httpx.HTTPError as e:
                raise _post_error("PaddleOCR", result_url, e) from None
        layout: list[dict] = []
        ocr: list[dict] = []
        for line in resp.text.strip().split("\n"):
            if line.strip():
                try:
                    result = (json.loads(line) or {}).get("result") or {}
                except ValueError as e:
                    raise ServiceError(f"PaddleOCR's result at {result_url} is not JSON lines: {e}") from None
                layout += result.get("layoutParsingResults") or []
                ocr += result.get("ocrResults") or []
        return self.boxes(layout, ocr)

    @staticmethod
    def boxes(layout: list[dict], ocr: list[dict]) -> list[dict[str, Any]]:
        """RAGFlow's PaddleOCRParser._transfer_to_sections for the pipeline: text, label, position."""
        out = []

        def box(text: str, label: str, page: int, bbox) -> dict[str, Any]:
            left, top, right, bottom = (float(v) for v in (list(bbox) + [0, 0, 0, 0])[:4])
            left, right = min(left, right), max(left, right)
            top, bottom = min(top, bottom), max(top, bottom)
            z = PADDLE_ZOOMIN
            return {"text": text, "layout_type": label or "text",
                    "positions": [[page + 1, left // z, right // z, top // z, bottom // z]]}
        if not layout:        # PP-OCRv6 and the like: text lines only
            for page, result in enumerate(ocr):
                pruned = result.get("prunedResult") or {}
                rec_boxes = pruned.get("rec_boxes") or []
                for i, text in enumerate(pruned.get("rec_texts") or []):
                    if str(text).strip():
                        out.append(box(str(text).strip(), "", page, rec_boxes[i] if i < len(rec_boxes) else [0, 0, 0, 0]))
            return out
        for page, result in enumerate(layout):
            for block in (result.get("prunedResult") or {}).get("parsing_res_list") or []:
                content = str(block.get("block_content") or "").strip()
                if content:
                    out.append(box(PADDLE_REMOVE_IMAGES.sub("", content), str(block.get("block_label") or ""), page,
                                   block.get("block_bbox") or [0, 0, 0, 0]))
        return out


def _json(resp, service: str, url: str) -> dict:
    try:
        found = resp.json()
    except ValueError:
        raise ServiceError(f"{service} at {url} did not answer JSON") from None
    if not isinstance(found, dict):
        raise ServiceError(f"{service} at {url} did not answer a JSON object")
    return found


# --- Apache Tika ----------------------------------------------------------------------------------
class Tika(Service):
    name, env = "Apache Tika", "TIKA_SERVER_ENDPOINT"

    def text(self, name: str, data: bytes, progress: Progress) -> str:
        """What tika-python's `parser.from_buffer` returns as `content`: every document's X-TIKA:content."""
        import httpx
        url = f"{self.url}/rmeta/text"
        try:
            with httpx.Client(timeout=TIMEOUT_S) as client:
                response = client.put(url, content=data, headers={"Accept": "application/json",
                                                                  "Content-Type": "application/octet-stream"})
                response.raise_for_status()
                found = response.json()
        except httpx.HTTPError as e:
            raise _post_error("Apache Tika", url, e) from None
        except ValueError:
            raise ServiceError(f"Apache Tika at {url} did not answer JSON") from None
        if not isinstance(found, list):
            raise ServiceError(f"Apache Tika at {url} did not answer a list of documents")
        content = "".join(str(d["X-TIKA:content"]) for d in found if isinstance(d, dict) and d.get("X-TIKA:content"))
        if not content:
            raise ServiceError(f"Apache Tika at {url} found no text in {name}")
        return content


# --- speech to text ---------------------------------------------------------------------------------
def transcribe(models, llm_id: str, component_id: str, name: str, data: bytes) -> str:
    """RAGFlow's Seq2txt `transcription`: OpenAI's client, `audio.transcriptions.create(model, file)`, at the
    provider the models config gives `llm_id` (its base URL and key, as a chat model's)."""
    import openai
    resolved = models._resolve(llm_id, component_id)
    client = openai.OpenAI(base_url=resolved.base_url, api_key=resolved.api_key, timeout=TIMEOUT_S, max_retries=0)
    url = resolved.base_url.rstrip("/") + "/audio/transcriptions"
    try:
        result = client.audio.transcriptions.create(model=resolved.model, file=(PurePosixPath(name).name, data))
    except openai.APIStatusError as e:
        raise ServiceError(f"the speech-to-text model {llm_id} at {url} answered HTTP {e.status_code}: "
                           f"{str(e.message)[:300]}") from None
    except openai.APIError as e:
        raise ServiceError(f"the speech-to-text model {llm_id} at {url} cannot be reached: {e}") from None
    text = getattr(result, "text", None)
    if not isinstance(text, str):
        raise ServiceError(f"the speech-to-text model {llm_id} at {url} answered without a text")
    return text.strip()


# --- which service a setup uses -------------------------------------------------------------------
PDF_CLIENTS = {"mineru": MinerU, "docling": Docling, "paddleocr": PaddleOCR}


def pdf_method(conf: dict) -> str:
    """The PDF method as RAGFlow's Parser resolves it: `<model>@MinerU` is MinerU, and so on."""
    low = str(conf.get("parse_method") or "").strip().lower()
    for suffix in ("mineru", "paddleocr", "somark", "mistral ocr"):
        if low.endswith("@" + suffix):
            return suffix
    return low


def client_for(family: str, conf: dict, environ: Mapping[str, str] | None = None) -> Service | None:
    """The configured service that parses this family's files, or None (not configured, or none exists).
    Raises ServiceError for a configuration that cannot work (an unknown MinerU backend, say)."""
    environ = os.environ if environ is None else environ
    cls = _client_class(family, conf)
    return cls.from_env(environ) if cls is not None else None


def _client_class(family: str, conf: dict) -> type[Service] | None:
    if pdf_method(conf) == "tcadp parser" and family in ("pdf", "spreadsheet", "slides"):
        from canvas2graph.nodes.pipeline.tcadp import TCADP
        return TCADP
    return PDF_CLIENTS.get(pdf_method(conf)) if family == "pdf" else Tika if family == "doc" else None


def what_to_configure(family: str, conf: dict) -> str | None:
    """How to make a service-parsed family work, for the diagnostic: the variable to set."""
    cls = _client_class(family, conf)
    return cls.how() if cls is not None else None



# --- what the Parser outputs --------------------------------------------------------------------
def pdf_output(boxes: list[dict[str, Any]], data: bytes, conf: dict) -> dict[str, Any]:
    """RAGFlow's `_pdf` after the parse: layout types normalised, headers and footers dropped when asked,
    `doc_type_kwd` set, then `json` (with `_pdf_positions`) or `markdown`; the PDF's outline as the file's."""
    from canvas2graph.nodes.pipeline.positions import PDF_POSITIONS_KEY, extract_positions
    items = []
    for b in boxes:
        raw = str(b.get("layout_type") or "").strip()
        layout = re.sub(r"\s+", " ", raw) if raw else "text"
        b["layout_type"] = layout
        if conf.get("remove_header_footer") and re.search(r"(header|footer|number)", raw, re.I):
            continue
        if conf.get("flatten_media_to_text"):
            b["doc_type_kwd"] = "text"
        elif layout == "table":
            b["doc_type_kwd"] = "table"
        elif layout in ("figure", "image"):
            b["layout_type"], b["doc_type_kwd"] = "figure", "image"
        else:
            b["doc_type_kwd"] = "text"
        items.append(b)
    pages, outlines = _pdf_facts(data)
    out: dict[str, Any] = {"pages": pages, "file_outlines": {"outlines": outlines}}
    if (conf.get("output_format") or "json") == "markdown":
        md = ""
        for b in items:
            if b["layout_type"] == "title":
                md += "\n## "
            md += b.get("text", "") + "\n"
        return {**out, "output_format": "markdown", "markdown": md}
    for b in items:
        positions = extract_positions(b)
        if positions:
            b[PDF_POSITIONS_KEY] = positions
    return {**out, "output_format": "json", "json": items}


def _pdf_facts(data: bytes) -> tuple[int, list[list]]:
    """(pages, outline as [title, depth, page]) as RAGFlow's extract_pdf_outlines reads it."""
    from pypdf import PdfReader
    try:
        reader = PdfReader(io.BytesIO(data))
        outlines: list[list] = []

        def walk(nodes, depth):
            for node in nodes:
                if isinstance(node, list):
                    walk(node, depth + 1)
                else:
                    outlines.append([str(node["/Title"]), depth, reader.get_destination_page_number(node) + 1])
        walk(reader.outline, 0)
        return len(reader.pages), outlines
    except Exception:       # noqa: BLE001 - RAGFlow too gives no outline for a PDF pypdf cannot read
        return 0, []


def doc_output(content: str, conf: dict) -> dict[str, Any]:
    """RAGFlow's `_doc`: Tika's text, one item per non-empty line (json), or the lines (markdown)."""
    sections = [line for line in content.split("\n") if line]
    if (conf.get("output_format") or "json") == "json":
        return {"output_format": "json", "json": [{"text": s, "doc_type_kwd": "text"} for s in sections]}
    return {"output_format": "markdown", "markdown": "\n".join(sections)}
