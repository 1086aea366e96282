"""Tencent Cloud's document parsing (TCADP, `parse_method: "TCADP Parser"`), as RAGFlow's deepdoc/parser/tcadp_parser.py calls it.

RAGFlow uses Tencent Cloud's SDK: `ReconstructDocumentSSE` of the `lkeap` service (version 2024-05-22) with
the file as base64 and `Config` {`TableResultType`, `MarkdownImageResponseType`}, read as server-sent events
until one says `Progress` "100" and names `DocumentRecognizeResultUrl`, a zip whose `.json` files (lists of
`{"type", "content", ...}` blocks) and `.md` files (text blocks) are the result. canvas2graph makes the same
request over HTTP with Tencent Cloud's TC3-HMAC-SHA256 signature (what the SDK computes), so no SDK is needed.

RAGFlow reads the keys from `tcadp_config` in service_conf.yaml (`secret_id`, `secret_key`, `region`);
here they are `TCADP_SECRET_ID`, `TCADP_SECRET_KEY` and `TCADP_REGION` (default ap-guangzhou), or the SDK's
own `TENCENTCLOUD_SECRET_ID`/`TENCENTCLOUD_SECRET_KEY`; `TCADP_ENDPOINT` replaces the API's URL
(https://lkeap.tencentcloudapi.com), for a proxy or a test server.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import io
import json
import re
import time
import zipfile
from datetime import datetime, timezone
from typing import Any, Mapping
from urllib.parse import urlsplit

from canvas2graph.nodes.pipeline.services import Progress, Service, ServiceError, _post_error

SERVICE, VERSION, ACTION = "lkeap", "2024-05-22", "ReconstructDocumentSSE"
DEFAULT_ENDPOINT = "https://lkeap.tencentcloudapi.com"
POSITION_TAG = "@@1\t0.0\t1000.0\t0.0\t100.0##"        # RAGFlow's "simplified" tag for every section
MAX_RESULT_BYTES = 512 * 1024 * 1024


def tc3_headers(secret_id: str, secret_key: str, host: str, payload: bytes, *, action: str = ACTION,
                region: str = "ap-guangzhou", timestamp: int | None = None) -> dict[str, str]:
    """Tencent Cloud API 3.0's signed headers (TC3-HMAC-SHA256), as its SDKs compute them."""
    timestamp = int(time.time()) if timestamp is None else timestamp
    date = datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%d")
    content_type = "application/json; charset=utf-8"
    canonical = "\n".join(["POST", "/", "", f"content-type:{content_type}\nhost:{host}\nx-tc-action:{action.lower()}\n",
                           "content-type;host;x-tc-action", hashlib.sha256(payload).hexdigest()])
    scope = f"{date}/{SERVICE}/tc3_request"
    to_sign = f"TC3-HMAC-SHA256\n{timestamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"

    def sign(key: bytes, msg: str) -> bytes:
        return hmac.new(key, msg.encode(), hashlib.sha256).digest()
    signing = sign(sign(sign(("TC3" + secret_key).encode(), date), SERVICE), "tc3_request")
    signature = hmac.new(signing, to_sign.encode(), hashlib.sha256).hexdigest()
    return {"Authorization": f"TC3-HMAC-SHA256 Credential={secret_id}/{scope}, "
                             f"SignedHeaders=content-type;host;x-tc-action, Signature={signature}",
            "Content-Type": content_type, "Host": host, "X-TC-Action": action, "X-TC-Timestamp": str(timestamp),
            "X-TC-Version": VERSION, "X-TC-Region": region, "Accept": "text/event-stream"}


class TCADP(Service):
    name, env = "Tencent Cloud TCADP", "TCADP_SECRET_ID"
    timeout = 1800.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> "TCADP | None":
        sid = (environ.get("TCADP_SECRET_ID") or environ.get("TENCENTCLOUD_SECRET_ID") or "").strip()
        key = (environ.get("TCADP_SECRET_KEY") or environ.get("TENCENTCLOUD_SECRET_KEY") or "").strip()
        if not sid and not key:
            return None
        if not sid or not key:         # RAGFlow: "Please set Tencent Cloud API keys"
            raise ServiceError("TCADP needs both TCADP_SECRET_ID and TCADP_SECRET_KEY (Tencent Cloud API keys)")
        return cls((environ.get("TCADP_ENDPOINT") or DEFAULT_ENDPOINT).strip(), environ)

    @classmethod
    def how(cls) -> str:
        return "set TCADP_SECRET_ID and TCADP_SECRET_KEY (Tencent Cloud API keys; TCADP_REGION, default ap-guangzhou)"

    def blocks(self, data: bytes, file_type: str, conf: dict, progress: Progress) -> list[dict[str, Any]]:
        """The result zip's content blocks for a file of `file_type` (PDF, XLSX, CSV, PPTX, PPT)."""
        import httpx
        env = self.environ
        sid = (env.get("TCADP_SECRET_ID") or env.get("TENCENTCLOUD_SECRET_ID") or "").strip()
        key = (env.get("TCADP_SECRET_KEY") or env.get("TENCENTCLOUD_SECRET_KEY") or "").strip()
        region = (env.get("TCADP_REGION") or "ap-guangzhou").strip()
        params = {"FileType": file_type, "FileStartPageNumber": 1, "FileEndPageNumber": 1000,
                  "FileBase64": base64.b64encode(data).decode(),
                  "Config": {"TableResultType": str(conf.get("table_result_type", "1")),
                             "MarkdownImageResponseType": str(conf.get("markdown_image_response_type", "1"))}}
        payload = json.dumps(params).encode()
        url = self.url + "/"
        headers = tc3_headers(sid, key, urlsplit(self.url).netloc, payload, region=region)
        progress(0.3, "[TCADP] Starting to call Tencent Cloud document parsing API")
        result: dict[str, Any] = {}
        try:
            with httpx.Client(timeout=self.timeout) as client:
                with client.stream("POST", url, content=payload, headers=headers) as resp:
                    resp.raise_for_status()
                    if "text/event-stream" not in resp.headers.get("content-type", ""):
                        raise ServiceError(f"TCADP at {url}: {_api_error(resp.read(), url)}")
                    for line in resp.iter_lines():
                        if not line.startswith("data:"):
                            continue
                        try:
                            event = json.loads(line[5:].strip())
                        except ValueError:
                            continue            # RAGFlow logs and skips an event it cannot read
                        event = event.get("Response", event) if isinstance(event, dict) else {}
                        if event.get("Error"):
                            raise ServiceError(f"TCADP at {url}: {event['Error'].get('Code')}: "
                                               f"{event['Error'].get('Message')}")
                        if str(event.get("Progress")) == "100":
                            result = event
                            break
                download = result.get("DocumentRecognizeResultUrl")
                if not result:
                    raise ServiceError(f"TCADP at {url}: the event stream ended before the parse finished")
                if not download:
                    raise ServiceError(f"TCADP at {url}: no parsing result download link obtained")
                progress(0.6, "[TCADP] Parsing result download link obtained")
                zipped = client.get(download)
                zipped.raise_for_status()
        except httpx.HTTPError as e:
            raise _post_error("TCADP", url, e) from None
        blocks = extract_zip(zipped.content, download)
        progress(0.9, f"[TCADP] Extracted {len(blocks)} content blocks")
        return blocks

    def pdf(self, name: str, data: bytes, conf: dict, progress: Progress) -> list[dict[str, Any]]:
        """RAGFlow's `_pdf` for TCADP: each section a text box on page 1 at RAGFlow's fixed position."""
        boxes = []
        for text, tag in sections(self.blocks(data, "PDF", conf, progress)):
            m = re.match(r"@@([0-9-]+)\t([0-9.]+)\t([0-9.]+)\t([0-9.]+)\t([0-9.]+)##", tag)
            pn, x0, x1, top, bottom = m.groups()
            boxes.append({"page_number": int(pn.split("-")[0]), "x0": float(x0), "x1": float(x1), "top": float(top),
                          "bottom": float(bottom), "text": text, "layout_type": "text"})
        return boxes

    def office(self, family: str, name: str, data: bytes, conf: dict, progress: Progress) -> dict[str, Any]:
        """RAGFlow's `_spreadsheet` and `_slides` for TCADP: sections and HTML tables in the setup's format."""
        if family == "spreadsheet":
            file_type = "XLSX" if re.search(r"\.xlsx?$", name, re.IGNORECASE) else "CSV"
            fmt = conf.get("output_format", "html")
        else:
            file_type = "PPTX" if re.search(r"\.pptx?$", name, re.IGNORECASE) else "PPT"
            fmt = conf.get("output_format", "json")
        progress(0.2, f"Using TCADP parser for {file_type} file.")
        blocks = self.blocks(data, file_type, conf, progress)
        texts = [t for t, _ in sections(blocks) if t]
        tables = [t for t in html_tables(blocks) if t]
        table_kind = "text" if family == "spreadsheet" and conf.get("flatten_media_to_text") else "table"
        if fmt == "json" or family == "slides":       # RAGFlow: slides only support json
            return {"output_format": "json", "json": [{"text": t, "doc_type_kwd": "text"} for t in texts]
                    + [{"text": t, "doc_type_kwd": table_kind} for t in tables]}
        if fmt == "html":
            return {"output_format": "html", "html": "".join(t + "\n" for t in texts + tables)}
        return {"output_format": "markdown", "markdown": "".join(t + "\n\n" for t in texts + tables)}


def _api_error(body: bytes, url: str) -> str:
    try:
        err = (json.loads(body).get("Response") or {}).get("Error") or {}
    except (ValueError, AttributeError):
        return "did not answer an event stream"
    return f"{err.get('Code')}: {err.get('Message')}" if err else "did not answer an event stream"


def extract_zip(data: bytes, where: str) -> list[dict[str, Any]]:
    """RAGFlow's `_extract_content_from_zip`: the .json blocks and .md texts, refusing unsafe entries."""
    out: list[dict[str, Any]] = []
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise ServiceError(f"TCADP's result at {where} is not a zip") from None
    with archive:
        if sum(m.file_size for m in archive.infolist()) > MAX_RESULT_BYTES:
            raise ServiceError(f"TCADP's result at {where} unpacks to more than {MAX_RESULT_BYTES >> 20} MB")
        for member in archive.infolist():
            name = member.filename.replace("\\", "/")
            if member.is_dir():
                continue
            parts = [p for p in name.split("/") if p not in ("", ".")]
            if member.flag_bits & 0x1 or (member.external_attr >> 16) & 0o170000 == 0o120000 \
                    or name.startswith("/") or re.match(r"^[A-Za-z]:", name) or ".." in parts:
                raise ServiceError(f"TCADP's result at {where} holds an unsafe entry: {member.filename}")
            if name.endswith(".json"):
                try:
                    found = json.loads(archive.read(member))
                except ValueError as e:
                    raise ServiceError(f"TCADP's result {member.filename} is not JSON: {e}") from None
                out += found if isinstance(found, list) else [found]
            elif name.endswith(".md"):
                out.append({"type": "text", "content": archive.read(member).decode("utf-8"), "file": name})
    return out


def sections(blocks: list[Any]) -> list[tuple[str, str]]:
    """RAGFlow's `_parse_content_to_sections`: (text, position tag) per non-empty block."""
    out = []
    for item in blocks:
        if not isinstance(item, dict) or not item.get("content"):
            continue
        kind, content = item.get("type", "text"), item["content"]
        if kind in ("text", "paragraph"):
            text = content
        elif kind == "table":
            table = item.get("table_data", {})
            text = "\n".join(" | ".join(row) for row in table.get("rows", [])) if isinstance(table, dict) else str(table)
        elif kind == "image":
            text = f"[Image] {item['caption']}" if item.get("caption") else "[Image]"
        elif kind == "equation":
            text = f"$${content}$$"
        else:
            text = content
        if isinstance(text, str) and text.strip():
            out.append((text, POSITION_TAG))
    return out


def html_tables(blocks: list[Any]) -> list[str]:
    """RAGFlow's `_parse_content_to_tables`: each table block's rows as HTML, the first row as headers."""
    out = []
    for item in blocks:
        if not isinstance(item, dict) or item.get("type") != "table":
            continue
        rows = (item.get("table_data") or {}).get("rows", []) if isinstance(item.get("table_data"), dict) else []
        if rows:
            html = "<table>\n"
            for i, row in enumerate(rows):
                tag = "th" if i == 0 else "td"
                html += "  <tr>\n" + "".join(f"    <{tag}>{cell}</{tag}>\n" for cell in row) + "  </tr>\n"
            out.append(html + "</table>")
    return out
