"""TCADP (Tencent Cloud document parsing) through a local server that checks Tencent Cloud's TC3 signature,
streams RAGFlow's events and serves the result zip; without keys, a diagnostic naming them."""
from __future__ import annotations

import hashlib
import hmac
import io
import json
import re
import zipfile
from datetime import datetime, timezone

import pytest

from canvas2graph.compiler.canvas import diagnose
from tests.nodes.pipeline.helpers import node, run
from tests.nodes.pipeline.test_parse_services import FakeService, two_page_pdf

SECRET_ID, SECRET_KEY = "AKIDtest", "s3cr3t"
BLOCKS = [{"type": "paragraph", "content": "Refunds are paid within 14 days."},
          {"type": "table", "content": "fees", "table_data": {"rows": [["Fee", "Amount"], ["Late", "5"]]}},
          {"type": "image", "content": "img", "caption": "A parcel"},
          {"type": "equation", "content": "a+b"},
          {"type": "text", "content": ""}]


def signature_ok(headers, body: bytes) -> bool:
    """Tencent Cloud's TC3-HMAC-SHA256 check, from the request as received (its documented algorithm)."""
    auth = headers["Authorization"]
    m = re.fullmatch(r"TC3-HMAC-SHA256 Credential=([^/]+)/(\d{4}-\d{2}-\d{2})/(\w+)/tc3_request, "
                     r"SignedHeaders=([\w;-]+), Signature=([0-9a-f]{64})", auth)
    if not m or m.group(1) != SECRET_ID or m.group(3) != "lkeap":
        return False
    date, signed = m.group(2), m.group(4).split(";")
    timestamp = headers["X-TC-Timestamp"]
    if datetime.fromtimestamp(int(timestamp), timezone.utc).strftime("%Y-%m-%d") != date:
        return False
    canonical_headers = "".join(f"{h}:{headers[h].lower() if h == 'x-tc-action' else headers[h]}\n" for h in signed)
    canonical = f"POST\n/\n\n{canonical_headers}\n{';'.join(signed)}\n{hashlib.sha256(body).hexdigest()}"
    to_sign = (f"TC3-HMAC-SHA256\n{timestamp}\n{date}/lkeap/tc3_request\n"
               f"{hashlib.sha256(canonical.encode()).hexdigest()}")
    key = hmac.new(("TC3" + SECRET_KEY).encode(), date.encode(), hashlib.sha256).digest()
    key = hmac.new(key, b"lkeap", hashlib.sha256).digest()
    key = hmac.new(key, b"tc3_request", hashlib.sha256).digest()
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest() == m.group(5)


def result_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("result/blocks.json", json.dumps(BLOCKS))
        z.writestr("result/notes.md", "# Notes\nShipping is free.")
        z.writestr("result/page.png", b"\x89PNG")
    return buf.getvalue()


@pytest.fixture
def tencent(monkeypatch):
    def handle(method, path, headers, body):
        if method == "GET" and path == "/result.zip":
            return 200, "application/zip", result_zip()
        if method != "POST" or headers["X-TC-Action"] != "ReconstructDocumentSSE" or not signature_ok(headers, body):
            return 200, "application/json", json.dumps({"Response": {"Error": {
                "Code": "AuthFailure.SignatureFailure", "Message": "The provided credentials could not be validated."},
                "RequestId": "r-1"}}).encode()
        events = [{"Progress": "10"}, "not json", {"Progress": "100", "TaskId": "t-1", "SuccessPageNum": 2,
                                                     "DocumentRecognizeResultUrl": f"{server.url}/result.zip"}]
        stream = "".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in events)
        return 200, "text/event-stream", stream.encode()
    server = FakeService(handle)
    monkeypatch.setenv("TCADP_ENDPOINT", server.url)
    monkeypatch.setenv("TCADP_SECRET_ID", SECRET_ID)
    monkeypatch.setenv("TCADP_SECRET_KEY", SECRET_KEY)
    monkeypatch.setenv("TCADP_REGION", "ap-shanghai")
    yield server
    server.close()


def parse(tmp_path, name: str, data: bytes, setups: dict):
    path = tmp_path / name
    path.write_bytes(data)
    return run(node("Parser", {"setups": setups}), {"name": name, "file": {"name": name}},
               file={"name": name, "path": str(path)})


def test_a_pdf_is_sent_signed_with_its_config_and_its_sections_become_ragflows_boxes(tmp_path, tencent):
    pdf = two_page_pdf()
    out, progress = parse(tmp_path, "policy.pdf", pdf, {"pdf": {
        "suffix": ["pdf"], "parse_method": "TCADP Parser", "output_format": "json", "table_result_type": "0"}})
    request = tencent.requests[0]
    assert request["headers"]["X-TC-Version"] == "2024-05-22" and request["headers"]["X-TC-Region"] == "ap-shanghai"
    sent = json.loads(request["body"])
    assert sent["FileType"] == "PDF" and (sent["FileStartPageNumber"], sent["FileEndPageNumber"]) == (1, 1000)
    assert sent["Config"] == {"TableResultType": "0", "MarkdownImageResponseType": "1"}
    import base64
    assert base64.b64decode(sent["FileBase64"]) == pdf
    assert [b["text"] for b in out["json"]] == ["Refunds are paid within 14 days.", "Fee | Amount\nLate | 5",
                                                "[Image] A parcel", "$$a+b$$", "# Notes\nShipping is free."]
    first = out["json"][0]
    # RAGFlow's fixed position tag for every TCADP section: page 1, x 0-1000, top 0-100
    assert (first["page_number"], first["x0"], first["x1"], first["top"], first["bottom"]) == (1, 0.0, 1000.0, 0.0, 100.0)
    assert first["layout_type"] == "text" and first["doc_type_kwd"] == "text" and out["pages"] == 2
    assert any("Extracted 6 content blocks" in m for _, m in progress)


@pytest.mark.parametrize("fmt, expected", [
    ("json", [{"text": "Refunds are paid within 14 days.", "doc_type_kwd": "text"}]),
    ("html", "Refunds are paid within 14 days.\n"),
    ("markdown", "Refunds are paid within 14 days.\n\n")])
def test_a_spreadsheet_gets_ragflows_output_in_each_format_with_tables_as_html(tmp_path, tencent, fmt, expected):
    out, _ = parse(tmp_path, "fees.xlsx", b"PK-not-really", {"spreadsheet": {
        "suffix": ["xlsx", "csv"], "parse_method": "TCADP Parser", "output_format": fmt}})
    assert json.loads(tencent.requests[0]["body"])["FileType"] == "XLSX"
    table = "<table>\n  <tr>\n    <th>Fee</th>\n    <th>Amount</th>\n  </tr>\n  <tr>\n    <td>Late</td>\n    <td>5</td>\n  </tr>\n</table>"
    value = out[fmt]
    if fmt == "json":
        assert value[0] == expected[0] and value[-1] == {"text": table, "doc_type_kwd": "table"}
    else:
        assert value.startswith(expected) and table in value


def test_slides_are_json_items_and_a_ppt_is_sent_as_pptx_as_ragflows_pattern_does(tmp_path, tencent):
    out, _ = parse(tmp_path, "deck.ppt", b"old", {"slides": {
        "suffix": ["pptx", "ppt"], "parse_method": "TCADP Parser", "output_format": "json"}})
    assert json.loads(tencent.requests[0]["body"])["FileType"] == "PPTX"         # RAGFlow's `\.pptx?$`
    assert out["output_format"] == "json" and out["json"][-1]["doc_type_kwd"] == "table"


def test_a_wrong_key_is_tencents_error_named_and_the_file_fails(tmp_path, tencent, monkeypatch):
    monkeypatch.setenv("TCADP_SECRET_KEY", "wrong")
    with pytest.raises(ValueError) as e:
        parse(tmp_path, "a.pdf", two_page_pdf(), {"pdf": {"suffix": ["pdf"], "parse_method": "TCADP Parser",
                                                        "output_format": "json"}})
    assert str(e.value) == (f"pdf: TCADP at {tencent.url}/: AuthFailure.SignatureFailure: "
                            "The provided credentials could not be validated.")


def test_an_unsafe_result_zip_is_refused():
    from canvas2graph.nodes.pipeline.services import ServiceError
    from canvas2graph.nodes.pipeline.tcadp import extract_zip
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("../evil.json", "[]")
    with pytest.raises(ServiceError, match="unsafe entry: ../evil.json"):
        extract_zip(buf.getvalue(), "http://x/r.zip")


def test_without_keys_tcadp_is_a_diagnostic_naming_them_and_half_a_key_pair_too(monkeypatch):
    for var in ("TCADP_SECRET_ID", "TCADP_SECRET_KEY", "TENCENTCLOUD_SECRET_ID", "TENCENTCLOUD_SECRET_KEY"):
        monkeypatch.delenv(var, raising=False)
    doc = {"components": {
        "File": {"obj": {"component_name": "File", "params": {}}, "downstream": ["Parser:P"]},
        "Parser:P": {"obj": {"component_name": "Parser", "params": {"setups": {
            "pdf": {"suffix": ["pdf"], "parse_method": "TCADP Parser", "output_format": "json"},
            "slides": {"suffix": ["pptx"], "parse_method": "TCADP Parser", "output_format": "json"}}}},
            "downstream": []}}}
    _, diags = diagnose(doc)
    needs = {d.field: d.message for d in diags if d.code == "needs-service"}
    assert set(needs) == {"params.setups.pdf", "params.setups.slides"}
    assert all("Tencent Cloud's TCADP" in m and "TCADP_SECRET_ID and TCADP_SECRET_KEY" in m for m in needs.values())
    monkeypatch.setenv("TCADP_SECRET_ID", SECRET_ID)
    _, diags = diagnose(doc)
    assert any("needs both TCADP_SECRET_ID and TCADP_SECRET_KEY" in d.message for d in diags)
