"""Testing agents over HTTP: a session recorded as a regression case (a zip that `canvas2graph test`
runs), and evaluations over an uploaded dataset kept per tenant, listed, read and compared between two
versions. One real server per database (SQLite file, PostgreSQL), two tenants."""
from __future__ import annotations

import io
import json
import uuid
import zipfile
from pathlib import Path

import pytest

from canvas2graph.cli import main
from tests.server.helpers import Api, Server, make_token, wait_for

REPO = Path(__file__).resolve().parents[2]
DEMO = json.loads((REPO / "fixtures" / "demo" / "support_desk.json").read_text())
BILLING = "The duplicate charge is refunded within five days."
ROWS = [{"query": f"Why was I charged twice? ({i})" if i % 2 == 0 else f"The app crashes ({i})",
         "expected": "refunded" if i % 2 == 0 else "restart"} for i in range(20)]
# every run (a turn, an evaluation of one version) gets a fresh copy: rows alternate desks, the judge
# says rows 18 to 20 are wrong
SCRIPT = {"by_component": {"Categorize:Desk": ["billing" if i % 2 == 0 else "technical" for i in range(20)],
                           "LLM:Billing": [BILLING] * 10, "LLM:Technical": ["Please restart the app."] * 10,
                           "judge": ['{"score": 1, "reason": "the same facts"}'] * 17
                                    + ['{"score": 0, "reason": "wrong"}'] * 3}}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def served(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("testing")
    if request.param == "sqlite":
        db = str(tmp / "server.db")
    else:
        from tests.runtime.checkpointers import postgres_url
        db = postgres_url()
    with Server(db, tmp, SCRIPT) as server:
        alice = Api(server, make_token(db, f"alice-{uuid.uuid4().hex[:6]}"))
        bob = Api(server, make_token(db, f"bob-{uuid.uuid4().hex[:6]}"))
        yield server, alice, bob
        alice.close()
        bob.close()


def test_a_recorded_server_session_is_a_zip_that_canvas2graph_test_passes(served, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_FILES_DIR", str(tmp_path / "files"))
    _, alice, bob = served
    agent_id = alice.agent(DEMO)
    session_id = alice.session(agent_id)["id"]
    alice.stream("/agents/chat/completions", {"agent_id": agent_id, "session_id": session_id, "stream": True,
                                              "query": "Why was I charged twice this month?"})
    reply = alice.http.post(f"/agents/{agent_id}/sessions/{session_id}/record")
    assert reply.status_code == 200 and reply.headers["content-type"] == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(reply.content))
    folder = archive.namelist()[0].split("/")[0]
    assert sorted(archive.namelist()) == sorted(f"{folder}/{n}" for n in ("case.json", "agent.json", "script.json"))
    case = json.loads(archive.read(f"{folder}/case.json"))
    assert case["turns"][0]["expect"]["path"] == ["begin", "Categorize:Desk", "LLM:Billing", "Message:Answer"]
    assert json.loads(archive.read(f"{folder}/script.json"))["by_component"]["LLM:Billing"] == [BILLING]
    archive.extractall(tmp_path)
    assert main(["test", str(tmp_path / folder)]) == 0
    assert "1 case(s): 1 passed, 0 failed" in capsys.readouterr().out
    # another tenant's session is "not found", as an unknown one
    assert bob.http.post(f"/agents/{agent_id}/sessions/{session_id}/record").status_code == 404


def upload(api: Api, agent_id: str, rows: list[dict] | str, name: str = "rows.jsonl", **fields: str) -> dict:
    data = rows if isinstance(rows, str) else "".join(json.dumps(r) + "\n" for r in rows)
    return api.http.post(f"/agents/{agent_id}/evaluations", files={"file": (name, data.encode())}, data=fields).json()


def finished(api: Api, agent_id: str, evaluation_id: str) -> dict:
    def done():
        found = api.ok("GET", f"/agents/{agent_id}/evaluations/{evaluation_id}")
        return found if found["status"] != "running" else None
    return wait_for(done, timeout=120, what=f"evaluation {evaluation_id}")


def two_versions(api: Api) -> tuple[str, str, str]:
    """An agent saved twice: the demo, then a version sending technical questions to the fallback message."""
    agent_id = api.agent(DEMO)
    changed = json.loads(json.dumps(DEMO))
    changed["components"]["LLM:Technical"]["downstream"] = ["Message:Other"]
    api.ok("PUT", f"/agents/{agent_id}", {"dsl": changed})
    newest, oldest = api.ok("GET", f"/agents/{agent_id}/versions")
    return agent_id, oldest["id"], newest["id"]


def test_an_evaluation_is_created_from_a_dataset_and_kept_for_its_tenant(served):
    _, alice, bob = served
    agent_id, first, _ = two_versions(alice)
    created = upload(alice, agent_id, ROWS, metric="judge", judge="grader@OpenAI", version_id=first)
    assert created["code"] == 0, created
    assert created["data"]["status"] == "running" and created["data"]["rows"] == 20
    assert created["data"]["progress"] == {"done": 0, "total": 20}
    evaluation = finished(alice, agent_id, created["data"]["id"])
    assert evaluation["status"] == "finished", evaluation
    report = evaluation["report"]
    assert report["summary"]["score"] == 0.85 and report["summary"]["passed"] == 17
    assert [r["score"] for r in report["rows"]][-3:] == [0.0, 0.0, 0.0]
    assert report["rows"][0]["answer"] == f"Desk: (billing)\n{BILLING}" and report["rows"][0]["reason"] == "the same facts"
    listed = alice.ok("GET", f"/agents/{agent_id}/evaluations")
    assert [e["id"] for e in listed] == [evaluation["id"]] and "report" not in listed[0]
    assert "progress" not in evaluation and "progress" not in listed[0]        # only while it runs
    assert listed[0]["summary"]["score"] == 0.85 and listed[0]["version_id"] == first
    # bob sees neither the agent's evaluations nor this one
    assert bob.http.get(f"/agents/{agent_id}/evaluations").status_code == 404
    assert bob.http.get(f"/agents/{agent_id}/evaluations/{evaluation['id']}").status_code == 404


def test_two_versions_are_compared_row_by_row(served):
    _, alice, _ = served
    agent_id, first, second = two_versions(alice)
    a = finished(alice, agent_id, upload(alice, agent_id, ROWS, version_id=first)["data"]["id"])
    b = finished(alice, agent_id, upload(alice, agent_id, ROWS, version_id=second)["data"]["id"])
    comparison = alice.ok("GET", f"/agents/{agent_id}/evaluations/{a['id']}/compare/{b['id']}")
    assert comparison["summary"] == {"rows": 20, "changed": 10, "better": 0, "worse": 10}
    assert [c["row"] for c in comparison["changed"]] == list(range(2, 21, 2))
    assert comparison["changed"][0]["b"]["path"][-1] == "Message:Other"
    # the same in one evaluation: a version and the one to compare it with
    both = finished(alice, agent_id, upload(alice, agent_id, ROWS, version_id=first, compare_version_id=second)["data"]["id"])
    assert both["report"]["format"] == "canvas2graph-eval-comparison"
    assert both["summary"] == {"rows": 20, "changed": 10, "better": 0, "worse": 10}


def test_bad_evaluation_requests_are_refused_naming_the_field(served):
    _, alice, _ = served
    agent_id = alice.agent(DEMO)
    assert upload(alice, agent_id, ROWS, metric="judge")["message"] == \
        "`judge`: the judge metric needs the judge's model (model@Factory)"
    assert upload(alice, agent_id, ROWS, metric="close")["message"].startswith("`metric` must be one of exact")
    reply = upload(alice, agent_id, '{"query": "hi"}\nnot json\n')
    assert reply["message"] == "`file`: rows.jsonl: line 2: not valid JSON: Expecting value: line 1 column 1 (char 0)"
    reply = alice.http.post(f"/agents/{agent_id}/evaluations", files={"file": ("rows.jsonl", b'{"query": "hi"}\n')},
                            data={"version_id": "nope"})
    assert reply.status_code == 404 and "version nope" in reply.json()["message"]
