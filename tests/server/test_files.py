"""Files in and out of agents through RAGFlow's routes, against a real server on SQLite and on PostgreSQL.

A file goes in through `/agents/<id>/upload` (multipart, or `?url=`), reaches the run as RAGFlow passes
it (a Begin file field, `sys.files`, a webhook's file part), is read there (ExcelProcessor over the
workbook; a Message showing the field prints the file's content), and what the run produced
(DocGenerator's document) comes out through the attachment routes. Another tenant finds none of it;
the per-tenant limits (size, type, count, stored files) refuse with a 4xx in RAGFlow's envelope.
"""
from __future__ import annotations

import base64
import http.server
import io
import json
import os
import threading

import httpx
import openpyxl
import pytest

from tests.runtime.checkpointers import postgres_url
from tests.server.helpers import Api, Server, cpn, make_token

ENTRY_KEYS = {"id", "name", "size", "extension", "mime_type", "created_by", "created_at", "preview_url"}
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
LIMITS = """
max_file_mb = 0.25
max_files = 3

[tenants.carol]
types = ["csv"]
max_stored_files = 2
"""

# Begin asks for a workbook; ExcelProcessor reads it, a Message shows the field as RAGFlow prints it,
# and DocGenerator writes the sheet's table into a PDF offered as a download.
REPORT_DSL = {"components": {
    "begin": cpn("Begin", {"mode": "task", "inputs": {"sheet": {"type": "file", "name": "Sheet", "optional": False}}},
                 ["ExcelProcessor:Read"]),
    "ExcelProcessor:Read": cpn("ExcelProcessor", {"input_files": ["{begin@sheet}"]}, ["Message:Show"]),
    "Message:Show": cpn("Message", {"content": ["{ExcelProcessor:Read@summary}\n{begin@sheet}"]}, ["DocGenerator:Doc"]),
    "DocGenerator:Doc": cpn("DocGenerator", {"output_format": "pdf", "filename": "regions",
                                             "content": "# Regions\n\n{ExcelProcessor:Read@markdown}"}, ["Message:Doc"]),
    "Message:Doc": cpn("Message", {"content": ["{DocGenerator:Doc@download}"]}),
}}
FILES_DSL = {"components": {
    "begin": cpn("Begin", {}, ["Message:M"]),
    "Message:M": cpn("Message", {"content": ["Got: {sys.files}"]}),
}}


def workbook() -> bytes:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Sales"
    for row in (("region", "total"), ("north", 10), ("south", 5)):
        sheet.append(row)
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"files-{request.param}")
    db = str(tmp / "server.db") if request.param == "sqlite" else postgres_url()
    (tmp / "limits.toml").write_text(LIMITS)
    env = {**os.environ, "CANVAS2GRAPH_ARTIFACTS_DIR": str(tmp / "artifacts"), "CANVAS2GRAPH_UPLOAD_ALLOW_PRIVATE": "1"}
    env.pop("CANVAS2GRAPH_ARTIFACT_URL", None)
    with Server(db, tmp, None, "--files-dir", str(tmp / "files"), "--upload-limits", str(tmp / "limits.toml"),
                env=env) as running:
        running.files = tmp / "files"
        yield running


@pytest.fixture(scope="module")
def alice(server):
    api = Api(server, make_token(server.db, f"alice-{os.getpid()}"))
    yield api
    api.close()


@pytest.fixture(scope="module")
def bob(server):
    api = Api(server, make_token(server.db, f"bob-{os.getpid()}"))
    yield api
    api.close()


@pytest.fixture(scope="module")
def carol(server):
    api = Api(server, make_token(server.db, "carol"))
    yield api
    api.close()


def upload(api: Api, agent_id: str, *files: tuple[str, bytes, str], **kw) -> httpx.Response:
    return api.http.post(f"/agents/{agent_id}/upload", files=[("file", f) for f in files], **kw)


def refused(response: httpx.Response, status: int, words: str, code: int = 101) -> None:
    """A 4xx with RAGFlow's envelope saying why."""
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == code and words in body["message"], body


# --- in, through the run, and out ------------------------------------------------------------------------
def test_an_uploaded_workbook_is_read_by_the_run_and_its_document_downloaded(alice):
    agent_id = alice.agent(REPORT_DSL)
    response = upload(alice, agent_id, ("sales.xlsx", workbook(), XLSX))
    assert response.status_code == 200
    entry = response.json()["data"]
    assert set(entry) == ENTRY_KEYS          # RAGFlow's upload_info
    assert (entry["name"], entry["extension"], entry["mime_type"]) == ("sales.xlsx", "xlsx", XLSX)
    assert entry["created_by"] == alice.ok("GET", f"/agents/{agent_id}")["user_id"]

    data = alice.ok("POST", "/agents/chat/completions", {
        "agent_id": agent_id, "inputs": {"sheet": {"type": "file", "value": [entry]}}})["data"]
    shown = data["content"]
    assert "**sales.xlsx**: 2 rows, 2 columns (region, total)" in shown         # ExcelProcessor read it
    # the Message prints the field as RAGFlow hands it on: the list of the files' parsed content
    printed = json.loads(shown[shown.index("["):shown.rindex("]") + 1])
    assert printed == ["\n -----------------\nFile: sales.xlsx\nContent as following: \n"
                       "Sheet: Sales\n| region | total |\n|---|---|\n| north | 10 |\n| south | 5 |"]

    [document] = data["outputs"]["downloads"]
    assert (document["filename"], document["mime_type"]) == ("regions.pdf", "application/pdf")
    pdf = alice.http.get(f"/agents/attachments/{document['doc_id']}/download")
    assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF") and len(pdf.content) == document["size"]
    assert pdf.headers["content-type"] == "application/pdf"
    assert pdf.headers["content-disposition"] == 'attachment; filename="regions.pdf"'
    preview = alice.http.get(f"/agents/attachments/{document['doc_id']}/preview")
    assert preview.headers["content-disposition"] == 'inline; filename="regions.pdf"'
    assert alice.http.get(f"/document/download/{document['doc_id']}").content == pdf.content   # RAGFlow's older path
    assert alice.http.get("/agents/download", params={"id": document["doc_id"]}).content == pdf.content
    # the upload itself comes back too
    back = alice.http.get("/agents/download", params={"id": entry["id"]})
    assert back.content == workbook_bytes(alice, entry) and back.headers["content-type"] == XLSX


def workbook_bytes(api: Api, entry: dict) -> bytes:
    return api.http.get(f"/agents/attachments/{entry['id']}/download").content


def test_files_of_a_completion_become_sys_files_as_their_content(alice):
    agent_id = alice.agent(FILES_DSL)
    one = upload(alice, agent_id, ("notes.txt", b"buy milk", "text/plain")).json()["data"]
    two = upload(alice, agent_id, ("more.md", b"# and bread", "text/markdown")).json()["data"]
    answer = alice.ok("POST", "/agents/chat/completions", {"agent_id": agent_id, "query": "hi",
                                                            "files": [one, two]})["data"]["content"]
    assert json.loads(answer[answer.index("["):]) == [
        "\n -----------------\nFile: notes.txt\nContent as following: \nbuy milk",
        "\n -----------------\nFile: more.md\nContent as following: \n# and bread"]


def test_uploaded_files_reach_an_llm_as_text_on_the_last_user_message_and_the_image_as_an_image(alice):
    png = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
    agent_id = alice.agent({"components": {
        "begin": cpn("Begin", {}, ["LLM:Read"]),
        "LLM:Read": cpn("LLM", {"llm_id": "m@OpenAI", "cite": False}, ["Message:M"]),
        "Message:M": cpn("Message", {"content": ["{LLM:Read@content}"]})}})
    note = upload(alice, agent_id, ("notes.txt", b"buy milk", "text/plain")).json()["data"]
    photo = upload(alice, agent_id, ("shelf.png", png, "image/png")).json()["data"]
    session_id = alice.session(agent_id)["id"]
    alice.ok("POST", "/agents/chat/completions", {"agent_id": agent_id, "session_id": session_id,
                                                  "query": "What do I need?", "files": [photo, note]})
    trace = alice.ok("GET", f"/agents/{agent_id}/sessions/{session_id}/trace")
    [step] = [s for s in trace["turns"][0]["steps"] if s["component_id"] == "LLM:Read" and s.get("messages")]
    [message] = step["messages"]
    assert message["content"] == "What do I need?\n\n\n -----------------\nFile: notes.txt\nContent as following: \nbuy milk"
    uri = "data:image/png;base64," + base64.b64encode(png).decode()
    assert message["images"] == [f"data:image/png;base64,… ({len(uri)} characters)"]    # its type and size


def test_several_files_in_one_request_answer_a_list_of_entries(alice):
    agent_id = alice.agent(FILES_DSL)
    response = upload(alice, agent_id, ("a.csv", b"x\n1\n", "text/csv"), ("b.json", b"{}", "application/json"))
    entries = response.json()["data"]
    assert [e["name"] for e in entries] == ["a.csv", "b.json"] and all(set(e) == ENTRY_KEYS for e in entries)


def test_a_url_is_fetched_as_the_file(alice):
    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"city,people\nParis,2100000\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/csv")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    page = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=page.serve_forever, daemon=True).start()
    try:
        agent_id = alice.agent(FILES_DSL)
        url = f"http://127.0.0.1:{page.server_address[1]}/data/cities.csv?v=2"
        entry = alice.http.post(f"/agents/{agent_id}/upload", params={"url": url}).json()["data"]
        assert (entry["name"], entry["mime_type"], entry["size"]) == ("cities.csv", "text/csv", 26)
        answer = alice.ok("POST", "/agents/chat/completions", {"agent_id": agent_id, "query": "hi",
                                                                "files": [entry]})["data"]["content"]
        assert "| Paris | 2100000 |" in answer          # a CSV reads as a table
    finally:
        page.shutdown()


# --- another tenant ----------------------------------------------------------------------------------------
def test_another_tenant_finds_neither_the_agent_nor_the_files_nor_the_documents(alice, bob):
    agent_id = alice.agent(REPORT_DSL)
    entry = upload(alice, agent_id, ("sales.xlsx", workbook(), XLSX)).json()["data"]
    data = alice.ok("POST", "/agents/chat/completions", {
        "agent_id": agent_id, "inputs": {"sheet": {"type": "file", "value": [entry]}}})["data"]
    doc_id = data["outputs"]["downloads"][0]["doc_id"]

    refused(upload(bob, agent_id, ("x.csv", b"a\n", "text/csv")), 404, "not found", code=102)
    run = bob.call("POST", "/agents/chat/completions", {"agent_id": agent_id,
                                                         "inputs": {"sheet": {"type": "file", "value": [entry]}}})
    assert run["code"] == 102 and "not found" in run["message"]
    # nor through an agent of his own, naming her file
    own = bob.agent(FILES_DSL)
    for body in ({"files": [entry]}, {"files": [{**entry, "created_by": "someone"}]},
                 {"inputs": {"sheet": {"type": "file", "value": entry}}}):
        run = bob.call("POST", "/agents/chat/completions", {"agent_id": own, "query": "hi", **body})
        assert run["code"] == 102 and run["message"] == f"file {entry['id']} not found", run
    for path, params in ((f"/agents/attachments/{doc_id}/download", None), (f"/agents/attachments/{doc_id}/preview", None),
                         ("/agents/download", {"id": doc_id}), ("/agents/download", {"id": entry["id"]}),
                         (f"/agents/attachments/{entry['id']}/download", None), (f"/document/download/{doc_id}", None)):
        refused(bob.http.get(path, params=params), 404, "not found", code=102)


def test_the_file_routes_want_a_token(server, alice):
    agent_id = alice.agent(FILES_DSL)
    anonymous = httpx.post(f"{server.url}/api/v1/agents/{agent_id}/upload", files={"file": ("a.csv", b"x")})
    refused(anonymous, 401, "Authorization", code=109)
    refused(httpx.get(f"{server.url}/api/v1/agents/attachments/{'0' * 32}/download"), 401, "Authorization", code=109)


# --- limits ----------------------------------------------------------------------------------------------
def test_size_type_and_count_limits_refuse_with_a_4xx(alice):
    agent_id = alice.agent(FILES_DSL)
    refused(upload(alice, agent_id, ("big.csv", b"x" * 300_000, "text/csv")), 413, "over the limit of 0.2 MB per file")
    refused(upload(alice, agent_id, ("tool.exe", b"MZ", "application/octet-stream")), 415, ".exe files cannot be uploaded")
    refused(upload(alice, agent_id, ("noext", b"x", "text/plain")), 415, "files without an extension")
    four = [(f"{i}.csv", b"x\n", "text/csv") for i in range(4)]
    refused(upload(alice, agent_id, *four), 400, "too many files")
    refused(upload(alice, agent_id, ("ok.csv", b"x\n", "text/csv"), ("tool.exe", b"MZ", "")), 415, "tool.exe")


def test_a_tenants_own_limits_replace_the_defaults(carol, server):
    agent_id = carol.agent(FILES_DSL)
    refused(upload(carol, agent_id, ("sales.xlsx", workbook(), XLSX)), 415, ".xlsx files cannot be uploaded")
    assert upload(carol, agent_id, ("a.csv", b"x\n", "text/csv")).status_code == 200
    assert upload(carol, agent_id, ("b.csv", b"x\n", "text/csv")).status_code == 200
    refused(upload(carol, agent_id, ("c.csv", b"x\n", "text/csv")), 413, "at most 2 files are kept")
    assert len(list((server.files / "carol").glob("*.json"))) == 2          # nothing stored by a refused upload


def test_malformed_uploads_are_told_what_to_send(alice):
    agent_id = alice.agent(FILES_DSL)
    refused(alice.http.post(f"/agents/{agent_id}/upload"), 400, "no file to upload")
    refused(alice.http.post(f"/agents/{agent_id}/upload", json={"file": "x"}), 400, "multipart/form-data")
    refused(alice.http.post(f"/agents/{agent_id}/upload", files={"files": ("a.csv", b"x")}), 400,
            "files go in the `file` field, not 'files'")
    refused(alice.http.post(f"/agents/{agent_id}/upload", content=b"--x\r\nbroken",
                            headers={"Content-Type": "multipart/form-data; boundary=x"}), 400, "")
    refused(alice.http.post(f"/agents/{agent_id}/upload", params={"url": "file:///etc/passwd"}), 400,
            "cannot be fetched")


# --- webhooks ---------------------------------------------------------------------------------------------
def webhook_dsl() -> dict:
    begin = {"mode": "Webhook", "methods": ["POST"], "execution_mode": "Streaming", "content_types": "multipart/form-data",
             "security": {"auth_type": "none", "allow_anonymous": True}, "response": {"status": 200},
             "schema": {"body": {"type": "object", "required": ["doc"], "properties": {
                 "doc": {"type": "file"}, "note": {"type": "string"}}}}}
    return {"components": {"begin": cpn("Begin", begin, ["Message:Out"]),
                           "Message:Out": cpn("Message", {"content": ["{begin@body.note}: {begin@body.doc}"],
                                                          "stream": False})}}


def test_a_webhooks_file_parts_are_stored_and_reach_the_run_like_uploads(server, alice):
    agent_id = alice.agent(webhook_dsl())
    hook = f"{server.url}/api/v1/agents/{agent_id}/webhook"
    response = httpx.post(hook, data={"note": "today"}, files={"doc": ("orders.csv", b"id\n7\n", "text/csv")}, timeout=60)
    assert response.status_code == 200, response.text
    note, _, doc = response.json()["message"].partition(": ")
    assert note == "today"
    assert json.loads(doc) == ["\n -----------------\nFile: orders.csv\nContent as following: \n| id |\n|---|\n| 7 |"]
    tenant = alice.ok("GET", f"/agents/{agent_id}")["user_id"]
    [stored] = [json.loads(p.read_text()) for p in (server.files / tenant).glob("*.json")
                if json.loads(p.read_text())["name"] == "orders.csv"]
    assert alice.http.get("/agents/download", params={"id": stored["id"]}).content == b"id\n7\n"
    four = [("doc", (f"{i}.csv", b"x\n", "text/csv")) for i in range(4)]
    too_many = httpx.post(hook, data={"note": "x"}, files=four, timeout=60)
    assert too_many.status_code == 400 and "too many files" in too_many.json()["message"]
    wrong = httpx.post(hook, data={"note": "x"}, files={"doc": ("run.exe", b"MZ", "")}, timeout=60)
    assert wrong.status_code == 415 and wrong.json()["code"] == 415
