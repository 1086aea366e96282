"""Parse services over HTTP: MinerU, Docling and Apache Tika, each a local server on 127.0.0.1 speaking its
protocol as RAGFlow's clients use it; configured by RAGFlow's variables, else a diagnostic naming them."""
from __future__ import annotations

import io
import json
import threading
import zipfile
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.nodes.pipeline.helpers import node, run


class FakeService:
    """A real HTTP server: `handle(method, path, headers, body) -> (status, content type, bytes)`; keeps requests."""

    def __init__(self, handle):
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.requests.append({"method": self.command, "path": self.path, "headers": dict(self.headers),
                                       "body": body})
                status, kind, data = handle(self.command, self.path, self.headers, body)
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            do_POST = do_PUT = do_GET = _serve

            def log_message(self, *args):
                pass
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def multipart(headers, body: bytes) -> dict[str, tuple[str | None, bytes]]:
    """{field: (file name, value)} of a multipart/form-data body."""
    msg = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + headers["Content-Type"].encode() + b"\r\n\r\n" + body)
    return {p.get_param("name", header="content-disposition"): (p.get_filename(), p.get_payload(decode=True))
            for p in msg.iter_parts()}


def two_page_pdf() -> bytes:
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas
    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=letter)      # 612 x 792 points
    c.drawString(72, 720, "Refund policy")
    c.showPage()
    c.drawString(72, 720, "Shipping")
    c.save()
    return buf.getvalue()


def parse(tmp_path: Path, name: str, data: bytes, setups: dict) -> tuple[dict, list]:
    path = tmp_path / name
    path.write_bytes(data)
    return run(node("Parser", {"setups": setups}), {"name": name, "file": {"name": name}},
               file={"name": name, "path": str(path)})


MINERU_BLOCKS = [
    {"type": "text", "text": "Refunds are paid within 14 days.", "text_level": 1, "bbox": [100, 50, 900, 100], "page_idx": 0},
    {"type": "header", "text": "ACME Corp", "bbox": [0, 0, 1000, 20], "page_idx": 0},
    {"type": "table", "table_body": "<table><tr><td>Fee</td><td>5</td></tr></table>", "table_caption": ["Fees"],
     "table_footnote": [], "bbox": [100, 200, 500, 300], "page_idx": 0},
    {"type": "image", "image_caption": ["A parcel"], "image_footnote": [], "bbox": [100, 400, 300, 600], "page_idx": 1},
    {"type": "list", "list_items": ["one", "two"], "bbox": [100, 700, 900, 800], "page_idx": 1},
    {"type": "page_number", "text": "2", "bbox": [490, 980, 510, 990], "page_idx": 1},
]


def mineru_zip(stem: str, blocks: list[dict]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(f"{stem}/auto/{stem}.md", "# ignored")
        z.writestr(f"{stem}/auto/{stem}_content_list.json", json.dumps(blocks))
    return buf.getvalue()


@pytest.fixture
def mineru():
    def handle(method, path, headers, body):
        if method != "POST" or path != "/file_parse":
            return 404, "application/json", b'{"detail": "Not Found"}'
        form = multipart(headers, body)
        name, _pdf = form["files"]
        stem = name.rsplit(".", 1)[0]
        return 200, "application/zip", mineru_zip(stem, MINERU_BLOCKS)
    server = FakeService(handle)
    yield server
    server.close()


def test_mineru_parses_a_pdf_into_ragflows_boxes_with_positions_in_points(tmp_path, mineru, monkeypatch):
    monkeypatch.setenv("MINERU_APISERVER", mineru.url)
    setups = {"pdf": {"parse_method": "MinerU", "suffix": ["pdf"], "output_format": "json", "lang": "English"}}
    out, progress = parse(tmp_path, "refund policy.pdf", two_page_pdf(), setups)

    request = mineru.requests[0]
    form = multipart(request["headers"], request["body"])
    assert form["files"][0] == "refundpolicy.pdf" and form["files"][1].startswith(b"%PDF")    # spaces removed
    assert form["lang_list"][1] == b"en" and form["backend"][1] == b"pipeline"
    assert form["return_content_list"][1] == b"True" and form["response_format_zip"][1] == b"True"
    assert "server_url" not in form

    items = out["json"]
    assert [i["text"] for i in items] == ["Refunds are paid within 14 days.",
                                         "<table><tr><td>Fee</td><td>5</td></tr></table>Fees",
                                         "A parcel\n", "one\ntwo"]    # header and page number dropped
    assert [(i["layout_type"], i["doc_type_kwd"]) for i in items] == [
        ("text", "text"), ("table", "table"), ("figure", "image"), ("list", "text")]
    # MinerU's 0-1000 box scaled to the 612 x 792 page, one decimal, as RAGFlow's position tag
    assert items[0]["positions"] == [[1, 61.2, 550.8, 39.6, 79.2]]
    assert items[0]["_pdf_positions"] == [[1, 61.2, 550.8, 39.6, 79.2]]
    assert items[2]["positions"] == [[2, 61.2, 183.6, 316.8, 475.2]]
    assert out["pages"] == 2
    assert any("MinerU" in m and "file_parse" in m for _, m in progress)


def test_mineru_boxes_become_chunks_with_ragflows_position_fields(tmp_path, mineru, monkeypatch):
    monkeypatch.setenv("MINERU_APISERVER", mineru.url)
    setups = {"pdf": {"parse_method": "MinerU", "suffix": ["pdf"], "output_format": "json"}}
    parsed, _ = parse(tmp_path, "p.pdf", two_page_pdf(), setups)
    chunks, _ = run(node("TokenChunker", {"chunk_token_size": 8}), parsed)
    first = chunks["chunks"][0]
    assert first["position_int"] == [[1, 61, 550, 39, 79]] and first["page_num_int"] == [1] and first["top_int"] == [39]
    assert "_pdf_positions" not in first


def test_mineru_is_reached_through_a_model_name_and_markdown_output(tmp_path, mineru, monkeypatch):
    monkeypatch.setenv("MINERU_APISERVER", mineru.url + "/")
    setups = {"pdf": {"parse_method": "mineru-pipeline@MinerU", "suffix": ["pdf"], "output_format": "markdown",
                      "remove_header_footer": True}}
    out, _ = parse(tmp_path, "p.pdf", two_page_pdf(), setups)
    assert out["output_format"] == "markdown"
    assert out["markdown"].startswith("Refunds are paid within 14 days.\n<table>")


def test_mineru_failures_name_the_service_its_url_and_what_went_wrong(tmp_path, monkeypatch):
    setups = {"pdf": {"parse_method": "mineru", "suffix": ["pdf"], "output_format": "json"}}
    broken = FakeService(lambda *a: (500, "text/plain", b"CUDA out of memory"))
    html = FakeService(lambda *a: (200, "text/html", b"<html>login</html>"))
    try:
        monkeypatch.setenv("MINERU_APISERVER", broken.url)
        with pytest.raises(ValueError, match=r"pdf: MinerU at http://127\.0\.0\.1:\d+/file_parse answered HTTP 500: CUDA out of memory"):
            parse(tmp_path, "p.pdf", two_page_pdf(), setups)
        monkeypatch.setenv("MINERU_APISERVER", html.url)
        with pytest.raises(ValueError, match=r"did not return a zip \(it returned text/html\)"):
            parse(tmp_path, "p.pdf", two_page_pdf(), setups)
    finally:
        broken.close()
        html.close()
    monkeypatch.setenv("MINERU_APISERVER", broken.url)          # closed: nothing listens there now
    with pytest.raises(ValueError, match=r"MinerU at .*/file_parse cannot be reached"):
        parse(tmp_path, "p.pdf", two_page_pdf(), setups)
    monkeypatch.setenv("MINERU_BACKEND", "gpu-please")
    with pytest.raises(ValueError, match="MINERU_BACKEND 'gpu-please' is not a MinerU backend"):
        parse(tmp_path, "p.pdf", two_page_pdf(), setups)


def test_docling_falls_back_from_chunking_to_a_standard_conversion_as_ragflow_does(tmp_path, monkeypatch):
    import base64

    def handle(method, path, headers, body):
        payload = json.loads(body)
        if payload["options"].get("do_chunking"):
            return 422, "application/json", b'{"detail": "do_chunking: extra fields not permitted"}'
        if path != "/v1/convert/source":
            return 404, "application/json", b"{}"
        source = payload["sources"][0]
        assert source["kind"] == "file" and base64.b64decode(source["base64_string"]).startswith(b"%PDF")
        return 200, "application/json", json.dumps({"document": {"filename": source["filename"],
                                                                  "md_content": "## Refunds\n\nWithin 14 days.\n"},
                                                     "status": "success"}).encode()
    server = FakeService(handle)
    monkeypatch.setenv("DOCLING_SERVER_URL", server.url)
    try:
        out, _ = parse(tmp_path, "p.pdf", two_page_pdf(), {"pdf": {"parse_method": "docling", "suffix": ["pdf"],
                                                                    "output_format": "json"}})
    finally:
        server.close()
    assert [r["path"] for r in server.requests] == ["/v1/convert/source", "/v1alpha/convert/source", "/v1/convert/source"]
    assert out["json"] == [{"text": "## Refunds\n\nWithin 14 days.", "layout_type": "text", "doc_type_kwd": "text"}]


def test_docling_native_chunks_are_taken_as_sections(tmp_path, monkeypatch):
    reply = {"results": [{"text": "Refunds within 14 days."}, {"chunk": {"text": "Shipping takes 3 days."}}, {"text": " "}]}
    server = FakeService(lambda *a: (200, "application/json", json.dumps(reply).encode()))
    monkeypatch.setenv("DOCLING_SERVER_URL", server.url)
    try:
        out, _ = parse(tmp_path, "p.pdf", two_page_pdf(), {"pdf": {"parse_method": "Docling", "suffix": ["pdf"],
                                                                    "output_format": "json"}})
    finally:
        server.close()
    assert len(server.requests) == 1 and json.loads(server.requests[0]["body"])["options"]["do_chunking"] is True
    assert [i["text"] for i in out["json"]] == ["Refunds within 14 days.", "Shipping takes 3 days."]


def test_docling_that_converts_nothing_fails_naming_every_attempt(tmp_path, monkeypatch):
    server = FakeService(lambda *a: (503, "text/plain", b"warming up"))
    monkeypatch.setenv("DOCLING_SERVER_URL", server.url)
    try:
        with pytest.raises(ValueError, match=r"Docling at http://127\.0\.0\.1:\d+: the conversion failed: "
                                             r"/v1/convert/source: HTTP 503 warming up \| /v1alpha/convert/source: HTTP 503"):
            parse(tmp_path, "p.pdf", two_page_pdf(), {"pdf": {"parse_method": "docling", "suffix": ["pdf"],
                                                               "output_format": "json"}})
    finally:
        server.close()


def test_tika_reads_a_legacy_doc_into_one_item_per_line(tmp_path, monkeypatch):
    def handle(method, path, headers, body):
        assert method == "PUT" and path == "/rmeta/text" and headers["Accept"] == "application/json"
        assert body == b"\xd0\xcf\x11\xe0 a Word 97 file"
        return 200, "application/json", json.dumps([
            {"Content-Type": "application/msword", "X-TIKA:content": "\nWarranty\n\nTwo years on every device.\n"},
            {"Content-Type": "image/png", "X-TIKA:content": "Embedded note\n"}]).encode()
    server = FakeService(handle)
    monkeypatch.setenv("TIKA_SERVER_ENDPOINT", server.url)
    try:
        out, _ = parse(tmp_path, "w.doc", b"\xd0\xcf\x11\xe0 a Word 97 file",
                       {"doc": {"suffix": ["doc"], "output_format": "json"}})
        md, _ = parse(tmp_path, "w.doc", b"\xd0\xcf\x11\xe0 a Word 97 file",
                      {"doc": {"suffix": ["doc"], "output_format": "markdown"}})
    finally:
        server.close()
    assert out["json"] == [{"text": "Warranty", "doc_type_kwd": "text"},
                           {"text": "Two years on every device.", "doc_type_kwd": "text"},
                           {"text": "Embedded note", "doc_type_kwd": "text"}]
    assert md["markdown"] == "Warranty\nTwo years on every device.\nEmbedded note"


def test_unconfigured_services_are_compile_warnings_naming_the_variable_and_configured_ones_are_not(monkeypatch):
    from canvas2graph.compiler.canvas import diagnose
    for var in ("MINERU_APISERVER", "DOCLING_SERVER_URL", "TIKA_SERVER_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)

    def warnings(pdf_method: str) -> dict[str, str]:
        doc = {"components": {
            "File": {"obj": {"component_name": "File", "params": {}}, "downstream": ["Parser:A"]},
            "Parser:A": {"obj": {"component_name": "Parser", "params": {"setups": {
                "pdf": {"parse_method": pdf_method, "suffix": ["pdf"], "output_format": "json"},
                "doc": {"suffix": ["doc"], "output_format": "json"}}}}, "downstream": []}}}
        _compiled, diags = diagnose(doc)
        return {d.field: d.message for d in diags if d.code == "needs-service"}

    found = warnings("MinerU")
    assert "set MINERU_APISERVER to the MinerU server's URL" in found["params.setups.pdf"]
    assert "set TIKA_SERVER_ENDPOINT to the Apache Tika server's URL" in found["params.setups.doc"]
    assert "set DOCLING_SERVER_URL" in warnings("docling")["params.setups.pdf"]
    assert "in its own process" in warnings("DeepDOC")["params.setups.pdf"]
    monkeypatch.setenv("MINERU_APISERVER", "http://127.0.0.1:9")
    monkeypatch.setenv("TIKA_SERVER_ENDPOINT", "http://127.0.0.1:9")
    assert warnings("MinerU") == {}
    monkeypatch.setenv("MINERU_BACKEND", "vlm-http-client")
    assert "needs MINERU_SERVER_URL" in warnings("MinerU")["params.setups.pdf"]


def test_an_image_is_described_by_the_vision_model_its_parse_method_names(tmp_path):
    import base64
    from PIL import Image
    from canvas2graph.runtime.services.environment import RunEnvironment, RunSettings
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"by_component": {"Parser:T": ["A receipt: 2 coffees, 7.40 EUR."]}}))
    ctx = RunEnvironment(RunSettings(llm_script=str(script))).context("t")
    png = io.BytesIO()
    Image.new("RGBA", (4, 3), (200, 30, 30, 128)).save(png, format="PNG")
    path = tmp_path / "receipt.png"
    path.write_bytes(png.getvalue())
    setups = {"image": {"parse_method": "gpt-4o@OpenAI", "suffix": ["png"], "output_format": "json", "lang": "English"}}
    out, _ = run(node("Parser", {"setups": setups}), {"name": "receipt.png"},
                 file={"name": "receipt.png", "path": str(path)}, ctx=ctx)
    assert out["json"] == [{"text": "A receipt: 2 coffees, 7.40 EUR.", "doc_type_kwd": "image"}]
    [request] = ctx.script.requests
    [message] = request["messages"]
    assert message["role"] == "human" and message["content"].startswith("Please describe the content of this picture")
    [url] = message["images"]
    assert url.startswith("data:image/jpeg;base64,")                # converted to RGB JPEG, as RAGFlow sends it
    assert Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).size == (4, 3)


def test_an_image_for_ocr_or_that_is_not_an_image_fails_naming_why(tmp_path):
    from canvas2graph.runtime.services.environment import RunEnvironment, RunSettings
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"auto_reply": "never asked"}))
    ctx = RunEnvironment(RunSettings(llm_script=str(script))).context("t")
    path = tmp_path / "scan.png"
    path.write_bytes(b"not a picture")
    with pytest.raises(ValueError, match="scan.png is not an image Pillow can read"):
        run(node("Parser", {"setups": {"image": {"parse_method": "gpt-4o@OpenAI", "suffix": ["png"], "output_format": "json"}}}),
            {"name": "scan.png"}, file={"name": "scan.png", "path": str(path)}, ctx=ctx)
    with pytest.raises(ValueError, match="parse_method 'ocr' needs DeepDoc's OCR model"):
        parse(tmp_path, "scan.png", b"not a picture", {"image": {"parse_method": "ocr", "suffix": ["png"], "output_format": "json"}})


def test_audio_is_transcribed_by_the_speech_model_vlm_names_at_its_provider(tmp_path, monkeypatch):
    from canvas2graph.runtime.services.environment import RunEnvironment, RunSettings

    def handle(method, path, headers, body):
        if path != "/v1/audio/transcriptions":
            return 404, "application/json", b'{"error": {"message": "no such route"}}'
        form = multipart(headers, body)
        assert form["model"][1] == b"whisper-1" and form["file"] == ("call.wav", b"RIFF....WAVEfmt ")
        return 200, "application/json", b'{"text": " Hello, I was charged twice. "}'
    server = FakeService(handle)
    monkeypatch.setenv("OPENAI_API_COMPATIBLE_BASE_URL", server.url + "/v1")
    ctx = RunEnvironment(RunSettings()).context("t")
    path = tmp_path / "call.wav"
    path.write_bytes(b"RIFF....WAVEfmt ")
    setups = {"audio": {"suffix": ["wav"], "output_format": "text", "vlm": {"llm_id": "whisper-1@OpenAI-API-Compatible"}}}
    try:
        out, _ = run(node("Parser", {"setups": setups}), {"name": "call.wav"},
                     file={"name": "call.wav", "path": str(path)}, ctx=ctx)
        assert out == {"output_format": "text", "text": "Hello, I was charged twice."}
        setups["audio"]["vlm"]["llm_id"] = "nope@OpenAI-API-Compatible"
        monkeypatch.setenv("OPENAI_API_COMPATIBLE_BASE_URL", server.url + "/v2")
        ctx = RunEnvironment(RunSettings()).context("t")
        with pytest.raises(ValueError, match=r"audio: the speech-to-text model nope@OpenAI-API-Compatible at "
                                             r"http://127\.0\.0\.1:\d+/v2/audio/transcriptions answered HTTP 404"):
            run(node("Parser", {"setups": setups}), {"name": "call.wav"}, file={"name": "call.wav", "path": str(path)},
                ctx=ctx)
    finally:
        server.close()


def test_audio_without_a_speech_model_is_a_warning_saying_where_to_name_it():
    from canvas2graph.compiler.canvas import diagnose
    doc = {"components": {
        "File": {"obj": {"component_name": "File", "params": {}}, "downstream": ["Parser:A"]},
        "Parser:A": {"obj": {"component_name": "Parser", "params": {"setups": {
            "audio": {"suffix": ["wav"], "output_format": "text"},
            "video": {"suffix": ["mp4"], "output_format": "text", "vlm": {"llm_id": "gpt-4o@OpenAI"}}}}},
            "downstream": []}}}
    _compiled, diags = diagnose(doc)
    found = {d.field: d.message for d in diags if d.code == "needs-service"}
    assert "speech-to-text model: name it in vlm.llm_id" in found["params.setups.audio"]
    assert "video" in found["params.setups.video"]


def test_paddleocr_jobs_are_submitted_polled_and_their_result_read_as_ragflow_does(tmp_path, monkeypatch):
    polls = []
    result = {"result": {"layoutParsingResults": [
        {"prunedResult": {"parsing_res_list": [
            {"block_label": "paragraph_title", "block_content": "Refunds", "block_bbox": [144, 100, 600, 140]},
            {"block_label": "text", "block_content": "Paid within 14 days. <img src=\"x.png\"/>", "block_bbox": [144, 160, 1100, 260]},
            {"block_label": "header", "block_content": "ACME", "block_bbox": [0, 0, 100, 20]}]}},
        {"prunedResult": {"parsing_res_list": [
            {"block_label": "table", "block_content": "<table><tr><td>Fee</td></tr></table>", "block_bbox": [144, 80, 900, 300]}]}}]}}

    def handle(method, path, headers, body):
        assert headers["Authorization"] == "Bearer t0ken" and headers["Client-Platform"] == "ragflow"
        if method == "POST" and path == "/api/v2/ocr/jobs":
            form = multipart(headers, body)
            assert form["model"][1] == b"PaddleOCR-VL" and form["file"][0] == "document.pdf"
            assert json.loads(form["optionalPayload"][1]) == {"prettifyMarkdown": True, "showFormulaNumber": True,
                                                              "visualize": False}
            return 200, "application/json", b'{"data": {"jobId": "j1"}}'
        if method == "GET" and path == "/api/v2/ocr/jobs/j1":
            polls.append(path)
            state = "running" if len(polls) == 1 else "done"
            return 200, "application/json", json.dumps({"data": {"state": state, "resultUrl": {
                "jsonUrl": server.url + "/results/j1.jsonl"}}}).encode()
        return 404, "text/plain", b"no"

    def results(method, path, headers, body):
        return 200, "application/jsonl", (json.dumps(result) + "\n").encode()

    server = FakeService(lambda m, p, h, b: results(m, p, h, b) if p.startswith("/results/") else handle(m, p, h, b))
    monkeypatch.setenv("PADDLEOCR_ACCESS_TOKEN", "t0ken")
    monkeypatch.setenv("PADDLEOCR_BASE_URL", server.url)
    try:
        out, progress = parse(tmp_path, "p.pdf", two_page_pdf(), {"pdf": {
            "parse_method": "PaddleOCR", "suffix": ["pdf"], "output_format": "json", "remove_header_footer": True}})
    finally:
        server.close()
    assert len(polls) == 2                               # polled until done
    items = out["json"]
    assert [(i["text"], i["layout_type"], i["doc_type_kwd"]) for i in items] == [
        ("Refunds", "paragraph_title", "text"), ("Paid within 14 days. ", "text", "text"),
        ("<table><tr><td>Fee</td></tr></table>", "table", "table")]       # the header dropped, images removed
    # PaddleOCR's boxes are at twice the page's scale: halved (floor) as RAGFlow's position tags
    assert items[0]["positions"] == [[1, 72.0, 300.0, 50.0, 70.0]] and items[2]["positions"] == [[2, 72.0, 450.0, 40.0, 150.0]]
    assert any("job submitted: j1" in m for _, m in progress)


def test_paddleocr_without_a_token_is_a_warning_naming_it(monkeypatch):
    from canvas2graph.compiler.canvas import diagnose
    monkeypatch.delenv("PADDLEOCR_ACCESS_TOKEN", raising=False)
    doc = {"components": {
        "File": {"obj": {"component_name": "File", "params": {}}, "downstream": ["Parser:A"]},
        "Parser:A": {"obj": {"component_name": "Parser", "params": {"setups": {
            "pdf": {"parse_method": "PaddleOCR-VL@PaddleOCR", "suffix": ["pdf"], "output_format": "json"}}}},
            "downstream": []}}}
    _compiled, diags = diagnose(doc)
    assert "set PADDLEOCR_ACCESS_TOKEN" in next(d.message for d in diags if d.code == "needs-service")
