"""Production's layout: API processes (`serve --workers 0`) and `canvas2graph worker`s on one PostgreSQL, and what
each failure costs. A turn is a durable job: it waits for a worker, survives the death of its worker (another
takes it over) and of the API process a client streams from, stops at once when cancelled from anywhere, and
the session logs each message once.

The model here streams one word every 250 ms (two answers of 4 words a turn), so a test can act mid-turn.
"""
from __future__ import annotations

import threading
import time
import uuid

import psycopg
import pytest

from tests.runtime.checkpointers import PrivatePostgres, postgres_url
from tests.server.helpers import (
    SLOW_SCRIPT, TWO_STEP_DSL, Api, Server, Worker, cpn, first_message, make_token, new_tenant, texts, wait_for,
)

CHAT = "/agents/chat/completions"
BOTH_ANSWERS = "Answer 1 from LLM:A.Answer 2 from LLM:B."


def log_of(api: Api, agent_id: str, sid: str) -> list[tuple[str, str]]:
    """The session's message log after its prologue (every session starts with Begin's greeting)."""
    log = api.ok("GET", f"/agents/{agent_id}/sessions/{sid}")["messages"]
    return [(m["role"], m["content"]) for m in log if m.get("id")]


def running_on(url: str, sid: str, workers: list[Worker]) -> Worker:
    """The worker whose process runs the session's turn (its row names the owner: host:pid:instance)."""
    with psycopg.connect(url) as conn:
        owner = conn.execute("SELECT owner FROM c2g_turns WHERE session_id = %s AND status = 'running'",
                             (sid,)).fetchone()
    assert owner is not None, "no turn of the session is running"
    pid = int(owner[0].rsplit(":", 2)[1])
    return next(w for w in workers if w.proc.pid == pid)


class Cluster:
    """Two API processes with no turn slots of their own, on one PostgreSQL; the tests start the workers."""

    def __init__(self, tmp_path, script: dict = SLOW_SCRIPT, url: str | None = None):
        self.url, self.tmp, self.script = url or postgres_url(), tmp_path, script
        self.apis: list[Server] = []
        self.workers: list[Worker] = []
        for _ in range(2):
            self.apis.append(Server(self.url, tmp_path, script, "--workers", "0").start())
        token = make_token(self.url, new_tenant())
        self.a, self.b = (Api(server, token) for server in self.apis)

    def worker(self, *extra: str) -> Worker:
        started = Worker(self.url, self.tmp, self.script, *extra).start()
        self.workers.append(started)
        return started

    def close(self) -> None:
        for process in [*self.workers, *self.apis]:
            process.kill()


@pytest.fixture
def cluster(tmp_path):
    made = Cluster(tmp_path)
    yield made
    made.close()


def test_a_turn_sent_while_no_worker_runs_waits_and_is_answered_when_one_starts(cluster):
    agent_id = cluster.a.agent(TWO_STEP_DSL)
    reply: dict = {}
    asking = threading.Thread(target=lambda: reply.update(
        cluster.a.ok("POST", CHAT, {"agent_id": agent_id, "query": "hi"})))
    asking.start()
    time.sleep(2)
    assert asking.is_alive()                              # queued: no worker runs it yet
    cluster.worker()
    asking.join(60)
    assert reply["data"]["content"] == BOTH_ANSWERS


def test_a_worker_killed_mid_turn_is_taken_over_and_the_clients_stream_ends_whole(cluster):
    cluster.worker()
    cluster.worker()
    a, b = cluster.a, cluster.b
    agent_id = a.agent(TWO_STEP_DSL)
    sid = a.session(agent_id)["id"]
    stream = a.iter_events(CHAT, {"agent_id": agent_id, "session_id": sid, "query": "go", "stream": True})
    seen = [first_message(stream)]
    running_on(cluster.url, sid, cluster.workers).kill()          # SIGKILL mid-answer
    killed = time.monotonic()
    seen += list(stream)
    assert time.monotonic() - killed < 40                         # taken over within 30 s, then answered
    assert seen[-1]["event"] == "workflow_finished"
    assert texts(seen).endswith(BOTH_ANSWERS)         # the re-run step's tokens may repeat; the answer ends whole
    assert log_of(a, agent_id, sid)[-2:] == [("user", "go"), ("assistant", BOTH_ANSWERS)]
    next_reply = b.ok("POST", CHAT, {"agent_id": agent_id, "session_id": sid, "query": "next"})
    assert next_reply["data"]["content"] == BOTH_ANSWERS          # answered as itself, by the other worker
    assert [role for role, _ in log_of(b, agent_id, sid)] == ["user", "assistant", "user", "assistant"]
    turns = b.ok("GET", f"/agents/{agent_id}/sessions/{sid}/trace")["turns"]     # the taken over turn is one turn
    assert [(t["query"], t["status"]) for t in turns] == [("go", "finished"), ("next", "finished")]


@pytest.mark.parametrize("stop", ["kill", "stop"])      # SIGKILL, or SIGTERM as a deploy stops it
def test_the_api_process_a_client_streams_from_dies_or_stops_and_the_turn_still_finishes(cluster, stop):
    cluster.worker()
    a, b = cluster.a, cluster.b
    agent_id = a.agent(TWO_STEP_DSL)
    sid = a.session(agent_id)["id"]
    stream = a.iter_events(CHAT, {"agent_id": agent_id, "session_id": sid, "query": "go", "stream": True})
    first_message(stream)
    getattr(cluster.apis[0], stop)()
    # the client re-attaches through the other API process and reads the whole turn
    events = b.stream(f"/agents/{agent_id}/sessions/{sid}/stream", None, method="GET")
    finished = [e["data"]["component_id"] for e in events if e["event"] == "node_finished"]
    assert finished[0] == "begin" and events[-1]["event"] == "workflow_finished"     # from its first event
    assert texts(events) == BOTH_ANSWERS
    assert log_of(b, agent_id, sid) == [("user", "go"), ("assistant", BOTH_ANSWERS)]


def test_cancel_through_the_other_api_process_stops_a_model_mid_stream_at_once(tmp_path):
    cluster = Cluster(tmp_path, {**SLOW_SCRIPT, "chunk_interval_ms": 1500})     # each answer takes 6 s
    try:
        cancel_mid_stream(cluster)
    finally:
        cluster.close()


def cancel_mid_stream(cluster: Cluster) -> None:
    cluster.worker()
    a, b = cluster.a, cluster.b
    agent_id = a.agent(TWO_STEP_DSL)
    stream = a.iter_events(CHAT, {"agent_id": agent_id, "query": "go", "stream": True})
    sid = first_message(stream)["session_id"]
    asked = time.monotonic()
    assert b.ok("POST", f"/tasks/{sid}/cancel") is True
    rest = list(stream)
    assert time.monotonic() - asked < 2                           # within 2 s, mid-way through the model's answer
    assert rest[-1]["event"] == "workflow_finished" and rest[-1]["data"]["outputs"] == "Task has been canceled"
    finished = [(e["data"]["component_id"], e["data"]["error"]) for e in rest if e["event"] == "node_finished"]
    assert ("Message:M1", "Task has been canceled") in finished and "LLM:B" not in {c for c, _ in finished}
    # the session takes the next message
    assert b.ok("POST", CHAT, {"agent_id": agent_id, "session_id": sid, "query": "again"}, timeout=60)["data"][
        "content"] == BOTH_ANSWERS


def test_a_second_message_to_a_busy_session_is_answered_after_the_first_in_arrival_order(cluster):
    cluster.worker()
    cluster.worker()
    a, b = cluster.a, cluster.b
    agent_id = a.agent(ECHO_DSL)
    sid = a.session(agent_id)["id"]
    replies: dict[str, str] = {}

    def ask(api: Api, query: str) -> None:
        replies[query] = api.ok("POST", CHAT, {"agent_id": agent_id, "session_id": sid, "query": query})["data"]["content"]

    threads = []
    for i, api in enumerate([a, b, a]):                   # three messages at once, through both API processes
        threads.append(threading.Thread(target=ask, args=(api, f"question {i}")))
        threads[-1].start()
        time.sleep(0.3)
    for thread in threads:
        thread.join(120)
    assert replies == {f"question {i}": f"question {i}=>Answer 1 from LLM:A." for i in range(3)}
    log = log_of(a, agent_id, sid)
    assert [content for role, content in log if role == "user"] == ["question 0", "question 1", "question 2"]


# begin -> LLM:A -> Message:M ("<question>=><answer>"): an answer says which question it answers (RAGFlow drops
# the spaces next to a reference in a streamed Message, SPEC section 10)
ECHO_DSL = {"components": {
    "begin": cpn("Begin", {}, ["LLM:A"]),
    "LLM:A": cpn("LLM", {"llm_id": "gpt-4o@OpenAI", "prompts": [{"role": "user", "content": "{sys.query}"}]},
                 ["Message:M"]),
    "Message:M": cpn("Message", {"content": ["{sys.query} => {LLM:A@content}"]}),
}}
FAST_SCRIPT = {"auto_reply": "Answer {n} from {component}.", "stream_chunks": 3, "chunk_interval_ms": 60}


def test_forty_conversations_of_three_turns_each_answer_every_message_as_itself_despite_a_killed_worker(tmp_path):
    cluster = Cluster(tmp_path, FAST_SCRIPT)
    try:
        for _ in range(3):
            cluster.worker("--concurrency", "20")
        agent_id = cluster.a.agent(ECHO_DSL)
        failures: list[str] = []
        sessions: dict[int, str] = {}

        def converse(i: int) -> None:
            api = (cluster.a, cluster.b)[i % 2]
            try:
                sid = api.session(agent_id)["id"]
                sessions[i] = sid
                for turn in range(3):
                    query = f"c{i} q{turn}"
                    answer = api.ok("POST", CHAT, {"agent_id": agent_id, "session_id": sid, "query": query})
                    if answer["data"]["content"] != f"{query}=>Answer 1 from LLM:A.":
                        failures.append(f"{query}: {answer['data']['content']!r}")
            except Exception as e:          # noqa: BLE001 - every failure is reported, not only the first
                failures.append(f"conversation {i}: {type(e).__name__}: {e}")

        threads = [threading.Thread(target=converse, args=(i,)) for i in range(40)]
        for thread in threads:
            thread.start()
        wait_for(lambda: len(sessions) >= 20, what="the conversations to start")
        time.sleep(1)
        cluster.workers[0].kill()                           # part-way through
        for thread in threads:
            thread.join(240)
        assert not failures, failures[:5]
        for i, sid in sessions.items():
            log = log_of(cluster.a, agent_id, sid)
            assert [c for r, c in log if r == "user"] == [f"c{i} q{t}" for t in range(3)]
            assert [c for r, c in log if r == "assistant"] == [f"c{i} q{t}=>Answer 1 from LLM:A." for t in range(3)]
    finally:
        cluster.close()


# --- the database restarts mid-turn -----------------------------------------------------------------------------
@pytest.fixture
def private_postgres():
    """A PostgreSQL server of the test's own: the test restarts it, and others use the machine's meanwhile."""
    database = PrivatePostgres()
    yield database
    database.remove()


def test_postgresql_restarting_mid_turn_costs_the_turn_a_pause_and_the_session_stays_usable(tmp_path, private_postgres):
    database = private_postgres
    cluster = Cluster(tmp_path, {**SLOW_SCRIPT, "chunk_interval_ms": 600}, database.url)
    try:
        cluster.worker()
        a, b = cluster.a, cluster.b
        agent_id = a.agent(TWO_STEP_DSL)
        sid = a.session(agent_id)["id"]
        stream = a.iter_events(CHAT, {"agent_id": agent_id, "session_id": sid, "query": "go", "stream": True})
        first_message(stream)
        database.restart()
        rest = list(stream)
        assert rest[-1]["event"] == "workflow_finished"       # resumed from its checkpoint once the database was back
        assert texts(rest).endswith("Answer 2 from LLM:B.")
        log = wait_for(lambda: (found := log_of(a, agent_id, sid)) and found[-1][0] == "assistant" and found,
                       timeout=60, what="the answer in the log")
        assert log == [("user", "go"), ("assistant", BOTH_ANSWERS)]
        assert b.ok("POST", CHAT, {"agent_id": agent_id, "session_id": sid, "query": "next"}, timeout=90)["data"][
            "content"] == BOTH_ANSWERS
        with psycopg.connect(cluster.url) as conn:
            assert conn.execute("SELECT count(*) FROM c2g_turns WHERE session_id = %s AND status IN "
                                "('queued', 'running')", (sid,)).fetchone()[0] == 0
    finally:
        cluster.close()


def test_a_worker_stopped_with_sigterm_hands_its_turn_back_and_another_finishes_it(cluster):
    cluster.worker("--graceful-seconds", "0.5")
    a = cluster.a
    agent_id = a.agent(TWO_STEP_DSL)
    sid = a.session(agent_id)["id"]
    stream = a.iter_events(CHAT, {"agent_id": agent_id, "session_id": sid, "query": "go", "stream": True})
    seen = [first_message(stream)]
    stopping = cluster.workers[0]
    stopping.proc.terminate()                       # SIGTERM: a deploy stops it
    assert stopping.proc.wait(30) == 0              # it stops at once: the turn went back to the queue
    cluster.worker()
    seen += list(stream)
    assert seen[-1]["event"] == "workflow_finished" and texts(seen).endswith(BOTH_ANSWERS)
    assert log_of(a, agent_id, sid) == [("user", "go"), ("assistant", BOTH_ANSWERS)]
