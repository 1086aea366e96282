"""`canvas2graph run` as a user runs it: a real process, a real (local) OpenAI-compatible server."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

DSL = {"components": {
    "begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": ["LLM:A"]},
    "LLM:A": {"obj": {"component_name": "LLM", "params": {"llm_id": "tiny@OpenAI-API-Compatible"}}, "downstream": ["Message:M"]},
    "Message:M": {"obj": {"component_name": "Message", "params": {"content": ["{LLM:A@content}"]}}, "downstream": []},
}}


class SlowModelServer:
    """Streams one chunk, then waits until the test releases it before finishing the reply."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.received = threading.Event()
        self.finished = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                outer.received.set()
                self.send_response(200)
                if not body.get("stream"):
                    outer.release.wait(30)
                    reply = {"id": "c1", "object": "chat.completion", "created": 0, "model": "tiny",
                             "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": "First words and the rest."}}]}
                    data = json.dumps(reply).encode()
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    outer.finished.set()
                    return
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()

                def chunk(text, finish=None):
                    body = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "tiny",
                            "choices": [{"index": 0, "delta": {"content": text} if text else {}, "finish_reason": finish}]}
                    self.wfile.write(f"data: {json.dumps(body)}\n\n".encode())
                    self.wfile.flush()

                chunk("First words ")
                outer.release.wait(30)
                chunk("and the rest.")
                chunk(None, "stop")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                outer.finished.set()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()


def cli(*args: str, env: dict | None = None, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "canvas2graph.cli", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})}, **kw)


def test_tokens_reach_stdout_before_the_model_has_finished(tmp_path):
    server = SlowModelServer()
    dsl = tmp_path / "dsl.json"
    dsl.write_text(json.dumps(DSL))
    try:
        proc = cli("run", str(dsl), "--query", "hello", "--format", "jsonl", "--db", str(tmp_path / "s.db"),
                   env={"OPENAI_API_COMPATIBLE_BASE_URL": server.url})
        first_message = None
        for line in proc.stdout:
            event = json.loads(line)
            if event["event"] == "message":
                first_message = event["data"]["content"]
                break
        assert first_message == "First words "
        assert not server.finished.is_set()          # the model is still writing its reply
        server.release.set()
        rest = [json.loads(line) for line in proc.stdout]
        assert proc.wait(30) == 0
    finally:
        server.close()
    assert rest[-1]["event"] == "workflow_finished"
    assert rest[-1]["data"]["outputs"]["content"] == "First words and the rest."


def test_a_missing_api_key_is_one_clear_line_naming_the_component_and_variable(tmp_path):
    dsl = tmp_path / "dsl.json"
    dsl.write_text(json.dumps({"components": {**DSL["components"], "LLM:A": {
        "obj": {"component_name": "LLM", "params": {"llm_id": "gpt-4o@OpenAI"}}, "downstream": ["Message:M"]}}}))
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    proc = subprocess.run([sys.executable, "-m", "canvas2graph.cli", "run", str(dsl), "--query", "hi", "--db", str(tmp_path / "s.db")],
                          cwd=REPO, capture_output=True, text=True, env=env)
    assert proc.returncode == 2
    assert "LLM:A" in proc.stderr and "OPENAI_API_KEY" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_stopped_turn_exits_1_after_reporting_the_failed_component(tmp_path):
    dsl = tmp_path / "dsl.json"
    dsl.write_text(json.dumps(DSL))
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"error": "rate limited"}]))
    proc = subprocess.run([sys.executable, "-m", "canvas2graph.cli", "run", str(dsl), "--query", "hi", "--format", "jsonl",
                           "--llm-script", str(script), "--db", str(tmp_path / "s.db")], cwd=REPO, capture_output=True, text=True)
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 1
    assert events[-1]["event"] == "node_finished"
    assert events[-1]["data"]["error"] == "**ERROR**: MAX_RETRIES_EXCEEDED - rate limited"
    assert "LLM:A: **ERROR**: MAX_RETRIES_EXCEEDED - rate limited" in proc.stderr


@pytest.mark.parametrize("content, message", [
    ("{not json", "is not valid JSON"),
    ("[1, 2]", "must hold a JSON object"),
])
def test_a_bad_inputs_file_is_refused_with_its_name(tmp_path, content, message):
    dsl = tmp_path / "dsl.json"
    dsl.write_text(json.dumps(DSL))
    inputs = tmp_path / "inputs.json"
    inputs.write_text(content)
    proc = subprocess.run([sys.executable, "-m", "canvas2graph.cli", "run", str(dsl), "--inputs", str(inputs),
                           "--db", str(tmp_path / "s.db")], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 2
    assert message in proc.stderr and "inputs.json" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_pretty_output_shows_steps_and_the_streamed_answer(tmp_path):
    dsl = tmp_path / "dsl.json"
    dsl.write_text(json.dumps(DSL))
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["Hello there."]))
    proc = subprocess.run([sys.executable, "-m", "canvas2graph.cli", "run", str(dsl), "--query", "hi", "--llm-script", str(script),
                           "--db", str(tmp_path / "s.db"), "--session", "demo"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "session demo" in proc.stdout
    assert "│ Hello there." in proc.stdout
    assert "finished" in proc.stdout


# begin -> LLM:A -> Message:M ("<question>=><answer>"); the scripted model streams a word every 300 ms
ECHO = {"components": {
    "begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": ["LLM:A"]},
    "LLM:A": {"obj": {"component_name": "LLM", "params": {"llm_id": "m@OpenAI", "prompts": [
        {"role": "user", "content": "{sys.query}"}]}}, "downstream": ["Message:M"]},
    "Message:M": {"obj": {"component_name": "Message", "params": {"content": ["{sys.query}=>{LLM:A@content}"]}},
                  "downstream": []},
}}


def test_a_run_killed_mid_turn_is_finished_before_the_next_question_which_is_answered_as_itself(tmp_path):
    dsl, script = tmp_path / "dsl.json", tmp_path / "script.json"
    dsl.write_text(json.dumps(ECHO))
    script.write_text(json.dumps({"auto_reply": "one two three four.", "stream_chunks": 4, "chunk_interval_ms": 300}))
    common = [str(dsl), "--llm-script", str(script), "--db", str(tmp_path / "s.db"), "--session", "k",
              "--format", "jsonl"]
    assert cli("run", *common, "--query", "first").wait(60) == 0
    proc = cli("run", *common, "--query", "second")
    for line in proc.stdout:                       # SIGKILL while the model writes its second answer
        if json.loads(line)["event"] == "message":
            proc.kill()
            break
    proc.wait(30)
    done = cli("run", *common, "--query", "third")
    out, err = done.communicate(timeout=60)
    assert done.returncode == 0, err
    assert "its last turn ('second') was interrupted; finishing it first, then answering this one" in err
    events = [json.loads(line) for line in out.splitlines()]
    answers = [e["data"]["outputs"]["content"] for e in events if e["event"] == "workflow_finished"]
    assert answers == ["second=>one two three four.", "third=>one two three four."]
    trace = cli("trace", "--session", "k", "--db", str(tmp_path / "s.db"), "--dsl", str(dsl))
    turns = json.loads(trace.communicate(timeout=60)[0])["turns"]
    assert [(t["query"], t["status"]) for t in turns] == [("first", "finished"), ("second", "finished"),
                                                         ("third", "finished")]


def test_a_script_answers_for_components_whose_llm_id_is_empty(tmp_path):
    # RAGFlow's templates leave some llm_ids empty; --llm-script replaces every model, those too
    template = tmp_path / "seo.json"
    exported = cli("templates", "export", "market_seo_article_writer", "-o", str(template))
    assert exported.wait(60) == 0
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"auto_reply": "scripted"}))
    done = cli("run", str(template), "--llm-script", str(script), "--query", "hi", "--db", str(tmp_path / "s.db"))
    out, err = done.communicate(timeout=120)
    assert done.returncode == 0, err
    assert "llm_id is empty" not in err and "finished" in out
    unscripted = cli("compile", str(template))
    assert "llm_id is empty" in unscripted.communicate(timeout=120)[0]     # without a script, still said
