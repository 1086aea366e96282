"""Files a CodeExec script writes are served by the server that ran it, at the path RAGFlow links
them by, and the answer links them there."""
from __future__ import annotations

import re

import httpx
import pytest

from tests.server.helpers import Api, Server, cpn, make_token

CHART = ("def main():\n"
         "    open('artifacts/chart.png', 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + b'0' * 16)\n"
         "    open('page.html', 'w').write('<script>alert(1)</script>')\n"
         "    return {'ok': True}\n")
SCRIPT = {"replies": [{"tool_calls": [{"name": "execute_code_0", "arguments": {"lang": "python", "script": CHART}}]},
                      "Here it is."]}
DSL = {"components": {
    "begin": cpn("Begin", {}, ["Agent:A"]),
    "Agent:A": cpn("Agent", {"llm_id": "m@OpenAI", "sys_prompt": "Use code.", "cite": False,
                             "prompts": [{"role": "user", "content": "{sys.query}"}],
                             "tools": [{"component_name": "CodeExec", "name": "CodeExec", "params": {}}]},
                   ["Message:M"]),
    "Message:M": cpn("Message", {"content": ["{Agent:A@content}"]}),
}}
LINK = re.compile(r"\((/api/v1/documents/artifact/[0-9a-f]{32}\.(png|html))\)")


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("artifacts")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CANVAS2GRAPH_ARTIFACTS_DIR", str(tmp / "store"))
        mp.delenv("CANVAS2GRAPH_ARTIFACT_URL", raising=False)
        mp.delenv("CANVAS2GRAPH_SANDBOX_URL", raising=False)
        db = str(tmp / "server.db")
        with Server(db, tmp, SCRIPT, "--allow-local-code") as server:
            client = Api(server, make_token(db, "alice"))
            yield client
            client.close()


def test_the_answer_links_the_files_to_this_server_which_serves_them(api):
    agent_id = api.agent(DSL)
    answer = api.ok("POST", "/agents/chat/completions", {"agent_id": agent_id, "query": "plot"})["data"]["content"]
    assert "Here it is.\n\n![chart.png](/api/v1/documents/artifact/" in answer
    links = dict((kind, path) for path, kind in LINK.findall(answer))
    png = httpx.get(api.server.url + links["png"])          # no token: a browser showing the image sends none
    assert png.status_code == 200 and png.headers["content-type"] == "image/png"
    assert png.content.startswith(b"\x89PNG")
    page = httpx.get(api.server.url + links["html"])
    assert page.headers["content-disposition"].startswith("attachment")     # saved, never run on this origin
    assert page.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize("name", ["0" * 32 + ".png", "..%2Fserver.db", "server.db", "x" * 32])
def test_only_stored_names_are_served(api, name):
    reply = httpx.get(f"{api.server.url}/api/v1/documents/artifact/{name}")
    assert reply.status_code == 404 and reply.json()["code"] == 404


def test_the_download_route_serves_an_agents_file_to_a_token_holder(api):
    agent_id = api.agent(DSL)
    answer = api.ok("POST", "/agents/chat/completions", {"agent_id": agent_id, "query": "plot"})["data"]["content"]
    name = dict((kind, path) for path, kind in LINK.findall(answer))["png"].rsplit("/", 1)[1]
    response = api.http.get("/agents/download", params={"id": name})
    assert response.status_code == 200 and response.content.startswith(b"\x89PNG")
    assert response.headers["content-disposition"].startswith("attachment")
    assert httpx.get(f"{api.server.url}/api/v1/agents/download", params={"id": name}).json()["code"] == 109
    assert api.call("GET", "/agents/download", params={"id": "0" * 32 + ".png"})["code"] == 102
    assert api.call("GET", "/agents/download")["code"] == 101


def test_a_codeexec_component_runs_alone_with_the_given_arguments(api):
    agent_id = api.agent({"components": {
        "begin": cpn("Begin", {}, ["CodeExec:Twice"]),
        "CodeExec:Twice": cpn("CodeExec", {"lang": "python", "script": "def main(text):\n    return text * 2\n",
                                           "arguments": {"text": "sys.query"},
                                           "outputs": {"result": {"type": "string", "value": ""}}})}})
    data = api.ok("POST", f"/agents/{agent_id}/components/CodeExec:Twice/debug", {"params": {"text": {"value": "ab"}}})
    assert data["result"] == "abab" and data["_ERROR"] == ""


DOC_DSL = {"components": {
    "begin": cpn("Begin", {}, ["DocGenerator:D"]),
    "DocGenerator:D": cpn("DocGenerator", {"output_format": "pdf", "content": "# Minutes\n\n{sys.query}",
                                           "filename": "minutes"}, ["Message:M"]),
    "Message:M": cpn("Message", {"content": ["Your document: {DocGenerator:D@download}"]}),
}}


def test_a_generated_document_is_offered_as_a_download_this_server_serves(api):
    agent_id = api.agent(DOC_DSL)
    data = api.ok("POST", "/agents/chat/completions", {"agent_id": agent_id, "query": "We agreed."})["data"]
    [offered] = data["outputs"]["downloads"]          # the reply carries the last workflow event, as RAGFlow
    assert (offered["filename"], offered["mime_type"]) == ("minutes.pdf", "application/pdf")
    assert offered["preview_url"] == f"/api/v1/documents/artifact/{offered['doc_id']}.pdf"
    pdf = httpx.get(api.server.url + offered["preview_url"])
    assert pdf.status_code == 200 and pdf.headers["content-type"] == "application/pdf"
    assert pdf.content.startswith(b"%PDF") and len(pdf.content) == offered["size"]


def test_the_server_refuses_the_browser_unless_allowed(api, tmp_path):
    from canvas2graph.server.config import ServerConfig
    from canvas2graph.server.services import RunServices
    assert RunServices(ServerConfig(db=str(tmp_path / "a.db"))).base["browser"] == {"allow": False}
    assert RunServices(ServerConfig(db=str(tmp_path / "b.db"), allow_browser=True)).base["browser"] == {"allow": True}
    dsl = {"components": {"begin": cpn("Begin", {}, ["Browser:B"]),
                          "Browser:B": cpn("Browser", {"llm_id": "m@OpenAI"}, ["Message:M"]),
                          "Message:M": cpn("Message", {"content": ["{Browser:B@content}"]})}}
    agent_id = api.agent(dsl)
    events = api.ok("POST", "/agents/chat/completions", {"agent_id": agent_id, "query": "open a page",
                                                         "return_trace": True})["data"]
    assert "switched off here" in str(events)
