"""Evaluations and ingestion runs are durable jobs, as turns are: a worker killed mid-evaluation is taken over by
another, which scores only the rows not scored yet; a `serve` killed mid-run on SQLite finishes it once restarted;
a cancel asked through any API process stops the run within a second or two; an ingestion's stream is read from the
event log, so its client may leave, or its server die, and the run still ends whole.

The model here waits before each reply (`delay_ms`), so a test can act mid-run.
"""
from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
import uuid
from pathlib import Path

import psycopg
import pytest

from tests.runtime.checkpointers import postgres_url
from tests.server.helpers import CHAT_DSL, REPO, Api, Server, Worker, make_token, wait_for

SLOW = {"auto_reply": "Answer {n} from {component}.", "delay_ms": 400}
ROWS = [{"query": f"question {i}", "expected": "Answer"} for i in range(16)]
DOCS = REPO / "fixtures" / "kb" / "docs"
NAMES = ["refunds.md", "shipping.html", "warranty.txt"]


def tenant() -> str:
    return f"tenant-{uuid.uuid4().hex[:8]}"


def query(db: str, sql: str, params: tuple = ()) -> list[tuple]:
    """Read the server's database as it runs (PostgreSQL, or the SQLite file read-only)."""
    if db.startswith("postgresql://"):
        with psycopg.connect(db) as conn:
            return conn.execute(sql.replace("?", "%s"), params).fetchall()
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def scored(db: str, evaluation_id: str) -> dict[int, dict]:
    """The rows an evaluation has scored so far, as kept."""
    return {r[0]: json.loads(r[1]) for r in query(
        db, "SELECT row_index, result FROM c2g_evaluation_rows WHERE evaluation_id = ? AND plan = 0", (evaluation_id,))}


def run_row(db: str, table: str, run_id: str) -> dict:
    status, owner, attempts = query(db, f"SELECT status, owner, attempts FROM {table} WHERE id = ?", (run_id,))[0]
    return {"status": status, "owner": owner, "attempts": attempts}


def evaluate(api: Api, agent_id: str, rows: list[dict] = ROWS) -> str:
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    reply = api.http.post(f"/agents/{agent_id}/evaluations", files={"file": ("rows.jsonl", data)}).json()
    assert reply["code"] == 0, reply
    return reply["data"]["id"]


def ended(api: Api, agent_id: str, evaluation_id: str, timeout: float = 120) -> dict:
    def done():
        found = api.ok("GET", f"/agents/{agent_id}/evaluations/{evaluation_id}")
        return found if found["status"] != "running" else None
    return wait_for(done, timeout=timeout, what=f"evaluation {evaluation_id} to end")


def assert_scored_once(report: dict, before: dict[int, dict], rows: int = len(ROWS)) -> None:
    """Every row once, and the rows scored before the kill exactly as they were kept (a row run again would have
    another latency, at least)."""
    assert [r["row"] for r in report["rows"]] == list(range(1, rows + 1))
    by_row = {r["row"]: r for r in report["rows"]}
    assert before and all(by_row[index] == result for index, result in before.items())
    assert report["summary"]["scored"] == rows and report["summary"]["passed"] == rows


# --- PostgreSQL: API processes and workers ---------------------------------------------------------------
class Cluster:
    def __init__(self, tmp: Path, apis: int, workers: int, script: dict = SLOW):
        self.url = postgres_url()
        self.processes: list[Server] = []
        self.apis = [self._started(Server(self.url, tmp, script, "--workers", "0")) for _ in range(apis)]
        self.workers = [self._started(Worker(self.url, tmp, script)) for _ in range(workers)]
        token = make_token(self.url, tenant())
        self.clients = [Api(server, token) for server in self.apis]

    def _started(self, process: Server) -> Server:
        self.processes.append(process)
        return process.start()

    def running(self, evaluation_id: str) -> Worker:
        owner = run_row(self.url, "c2g_evaluations", evaluation_id)["owner"]
        assert owner, "no worker runs the evaluation"
        pid = int(owner.rsplit(":", 2)[1])
        return next(w for w in self.workers if w.proc.pid == pid)

    def close(self) -> None:
        for client in self.clients:
            client.close()
        for process in self.processes:
            process.kill()


def test_a_worker_killed_mid_evaluation_is_taken_over_and_no_row_is_scored_twice(tmp_path):
    cluster = Cluster(tmp_path, apis=1, workers=2)
    try:
        api = cluster.clients[0]
        agent_id = api.agent(CHAT_DSL)
        evaluation_id = evaluate(api, agent_id)
        wait_for(lambda: len(scored(cluster.url, evaluation_id)) >= 3, what="three rows scored")
        victim = cluster.running(evaluation_id)
        victim.kill()                                       # SIGKILL mid-evaluation
        before = scored(cluster.url, evaluation_id)
        assert api.ok("GET", f"/agents/{agent_id}/evaluations/{evaluation_id}")["progress"]["done"] >= len(before)
        evaluation = ended(api, agent_id, evaluation_id)
        assert evaluation["status"] == "finished", evaluation
        assert_scored_once(evaluation["report"], before)
        assert run_row(cluster.url, "c2g_evaluations", evaluation_id)["attempts"] == 1     # one takeover
        assert scored(cluster.url, evaluation_id) == {}     # the report holds them now
    finally:
        cluster.close()


def test_a_worker_stopped_mid_evaluation_hands_it_back_and_another_finishes_it(tmp_path):
    cluster = Cluster(tmp_path, apis=1, workers=0)
    try:
        for _ in range(2):      # a second to end, then the running evaluation goes back to the queue
            cluster.workers.append(cluster._started(Worker(cluster.url, tmp_path, SLOW, "--graceful-seconds", "1")))
        api = cluster.clients[0]
        agent_id = api.agent(CHAT_DSL)
        evaluation_id = evaluate(api, agent_id)
        wait_for(lambda: len(scored(cluster.url, evaluation_id)) >= 3, what="three rows scored")
        stopping = cluster.running(evaluation_id)
        stopping.stop()                                     # SIGTERM
        before = scored(cluster.url, evaluation_id)
        evaluation = ended(api, agent_id, evaluation_id, timeout=60)
        assert evaluation["status"] == "finished", evaluation
        assert_scored_once(evaluation["report"], before)
        assert run_row(cluster.url, "c2g_evaluations", evaluation_id)["attempts"] == 0     # handed back: no takeover
    finally:
        cluster.close()


def test_an_evaluation_cancelled_through_the_other_api_process_stops_at_once(tmp_path):
    cluster = Cluster(tmp_path, apis=2, workers=1, script={**SLOW, "delay_ms": 1000})
    try:
        a, b = cluster.clients
        agent_id = a.agent(CHAT_DSL)
        evaluation_id = evaluate(a, agent_id)
        wait_for(lambda: scored(cluster.url, evaluation_id), what="a row scored")
        asked = time.monotonic()
        assert b.ok("POST", f"/agents/{agent_id}/evaluations/{evaluation_id}/cancel") is True
        evaluation = ended(b, agent_id, evaluation_id, timeout=10)
        assert time.monotonic() - asked < 3                 # mid-row: the model's reply is not waited for
        assert evaluation["status"] == "cancelled" and evaluation["error"] == "cancelled on request"
        assert "report" not in evaluation and "progress" not in evaluation
        assert scored(cluster.url, evaluation_id) == {}
        again = b.call("POST", f"/agents/{agent_id}/evaluations/{evaluation_id}/cancel")
        assert again["code"] != 0 and "is cancelled" in again["message"]
        # the worker goes on with other work
        other = evaluate(a, agent_id, ROWS[:2])
        assert ended(a, agent_id, other)["status"] == "finished"
    finally:
        cluster.close()


# --- SQLite: the embedded default, one `serve` --------------------------------------------------------------
def test_serve_killed_mid_evaluation_finishes_it_once_restarted(tmp_path):
    db = str(tmp_path / "server.db")
    server = Server(db, tmp_path, SLOW).start()
    token = make_token(db, tenant())
    api = Api(server, token)
    try:
        agent_id = api.agent(CHAT_DSL)
        evaluation_id = evaluate(api, agent_id)
        wait_for(lambda: len(scored(db, evaluation_id)) >= 3, what="three rows scored")
        server.kill()
        before = scored(db, evaluation_id)
        assert run_row(db, "c2g_evaluations", evaluation_id)["status"] == "running"
        server.start()
        api.close()
        api = Api(server, token)
        evaluation = ended(api, agent_id, evaluation_id)
        assert evaluation["status"] == "finished", evaluation
        assert_scored_once(evaluation["report"], before)
        assert run_row(db, "c2g_evaluations", evaluation_id)["attempts"] == 1
    finally:
        api.close()
        server.kill()


def slow_pipeline() -> str:
    """fixtures/kb/pipeline.json with an Extractor (a model call per file) before its Tokenizer."""
    dsl = json.loads((REPO / "fixtures" / "kb" / "pipeline.json").read_text())
    components = dsl["dsl"]["components"]
    components["TokenChunker:Chunks"]["downstream"] = ["Extractor:Sum"]
    components["Extractor:Sum"] = {
        "obj": {"component_name": "Extractor", "params": {
            "field_name": "summary", "llm_id": "gpt-4o@OpenAI",
            "prompts": [{"role": "user", "content": "Summarize: {TokenChunker:Chunks@chunks}"}]}},
        "downstream": ["Tokenizer:Index"], "upstream": ["TokenChunker:Chunks"]}
    components["Tokenizer:Index"]["upstream"] = ["Extractor:Sum"]
    return json.dumps(dsl)


def events_of(api: Api, path: str, method: str = "GET", **kw) -> list[dict]:
    with api.http.stream(method, path, **kw) as response:
        assert response.headers["content-type"].startswith("text/event-stream"), response.read()
        body = response.read().decode()
    return [json.loads(f[len("data:"):]) for f in body.split("\n\n") if f]


@pytest.fixture
def ingesting(tmp_path):
    """A SQLite `serve` whose model takes 1.5 s a reply, and its client."""
    config = tmp_path / "retrieval.toml"        # the first retrieval loads the tokenizer: slow on a busy machine
    config.write_text("timeout = 120\n")
    db = str(tmp_path / "server.db")
    server = Server(db, tmp_path, {"auto_reply": "A summary.", "delay_ms": 1500},
                    env={**os.environ, "CANVAS2GRAPH_RETRIEVAL_CONFIG": str(config)}).start()
    clients = [Api(server, make_token(db, tenant()))]
    yield server, clients
    clients[-1].close()
    server.kill()


def start_ingestion(api: Api, dataset: str) -> tuple[str, "object"]:
    """POST the slow pipeline over the three documents; returns the run's id and the open stream's lines."""
    files = [("file", (n, (DOCS / n).read_bytes(), "application/octet-stream")) for n in NAMES]
    stream = api.http.stream("POST", f"/datasets/{dataset}/ingest", data={"dsl": slow_pipeline()}, files=files)
    response = stream.__enter__()
    assert response.status_code == 200
    return response.headers["x-ingestion-id"], (stream, response.iter_lines())


def test_serve_killed_mid_ingestion_finishes_it_once_restarted_and_each_file_is_told_once(ingesting):
    server, clients = ingesting
    api = clients[0]
    ingestion_id, (stream, lines) = start_ingestion(api, "kb-restart")
    for line in lines:                                  # the client reads until the first file is stored
        if line.startswith("data:") and json.loads(line[5:])["event"] == "file_finished":
            break
    server.kill()                                       # the client's stream dies with it
    with contextlib.suppress(Exception):
        stream.__exit__(None, None, None)
    server.start()
    clients.append(Api(server, api.token))
    api = clients[-1]
    events = events_of(api, f"/datasets/kb-restart/ingestions/{ingestion_id}/events")
    kinds = [e["event"] for e in events]
    assert kinds[0] == "ingest_started" and kinds.count("ingest_started") == 1 and kinds[-1] == "ingest_finished"
    assert events[0]["data"]["ingest_id"] == ingestion_id and events[0]["data"]["kb_id"] == "kb-restart"
    assert sorted(e["data"]["name"] for e in events if e["event"] == "file_finished") == NAMES
    assert events[-1]["data"] | {"seconds": 0} == {"files": 3, "ingested": 3, "unchanged": 0, "failed": 0, "chunks": 3,
                                                  "pages": 3, "seconds": 0, "errors": []}
    run = api.ok("GET", f"/datasets/kb-restart/ingestions/{ingestion_id}")
    assert run["status"] == "finished" and run["report"]["ingested"] == 3
    assert run_row(server.db, "c2g_ingestions", ingestion_id)["attempts"] == 1
    # the files were stored once: the same request again finds them unchanged
    files = [("file", (n, (DOCS / n).read_bytes(), "application/octet-stream")) for n in NAMES]
    again = events_of(api, "/datasets/kb-restart/ingest", "POST", data={"dsl": slow_pipeline()}, files=files)
    assert [e["event"] for e in again].count("file_skipped") == 3


def test_an_ingestion_goes_on_when_its_client_leaves_and_a_cancel_stops_it(ingesting):
    _, clients = ingesting
    api = clients[0]
    ingestion_id, (stream, lines) = start_ingestion(api, "kb-leave")
    next(line for line in lines if line.startswith("data:"))
    stream.__exit__(None, None, None)                   # the client leaves
    wait_for(lambda: api.ok("GET", f"/datasets/kb-leave/ingestions/{ingestion_id}")["status"] == "finished",
             timeout=60, what="the ingestion to finish without its client")
    listed = api.ok("GET", "/datasets/kb-leave/ingestions")
    assert [run["id"] for run in listed] == [ingestion_id] and listed[0]["report"]["ingested"] == 3

    second, (stream, lines) = start_ingestion(api, "kb-cancel")
    next(line for line in lines if line.startswith("data:") and json.loads(line[5:])["event"] == "file_started")
    assert api.ok("POST", f"/datasets/kb-cancel/ingestions/{second}/cancel") is True
    rest = [json.loads(line[5:]) for line in lines if line.startswith("data:")]
    stream.__exit__(None, None, None)
    assert rest[-1] == {"event": "ingest_cancelled", "data": {"reason": "cancelled on request"}}
    assert "ingest_finished" not in [e["event"] for e in rest]
    assert api.ok("GET", f"/datasets/kb-cancel/ingestions/{second}")["status"] == "cancelled"
    # another tenant sees neither run
    other = Api(clients[0].server, make_token(clients[0].server.db, tenant()))
    try:
        assert other.http.get(f"/datasets/kb-cancel/ingestions/{second}").status_code == 404
        assert other.ok("GET", "/datasets/kb-leave/ingestions") == []
        assert other.call("POST", f"/datasets/kb-cancel/ingestions/{second}/cancel")["code"] != 0
    finally:
        other.close()
