"""`canvas2graph memory ...` and `run` with memories (issue 35): a memory made on the command line, an agent run
with `run` saving to it (its typed memories extracted once the answer is out), and the memory searched, shown and
deleted, all on the store beside the sessions database."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
EXTRACTED = {"semantic": [{"content": "The user drinks green tea.", "valid_at": "", "invalid_at": ""}]}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "canvas2graph.cli", *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)


def test_run_saves_to_a_memory_that_the_memory_commands_show_search_and_delete(tmp_path):
    db = str(tmp_path / "sessions.db")
    made = cli("memory", "create", "habits", "--type", "raw,semantic", "--llm-id", "tea@OpenAI", "--db", db)
    assert made.returncode == 0, made.stderr
    memory_id = made.stdout.strip()
    dsl, script = tmp_path / "save.json", tmp_path / "script.json"
    dsl.write_text(json.dumps({"components": {
        "begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": ["Message:M"]},
        "Message:M": {"obj": {"component_name": "Message", "params": {"content": ["Noted: {sys.query}"],
                                                                       "memory_ids": [memory_id]}}, "downstream": []}}}))
    script.write_text(json.dumps({"by_message": [{"match": "Exchange:", "reply": {"content": json.dumps(EXTRACTED)}}]}))
    ran = cli("run", str(dsl), "--query", "I drink green tea", "--db", db, "--llm-script", str(script))
    assert ran.returncode == 0, ran.stderr

    listed = cli("memory", "list", "--format", "json", "--db", db)
    [row] = json.loads(listed.stdout)
    assert (row["id"], row["name"], row["messages"]) == (memory_id, "habits", 2)     # the exchange and its extract
    found = json.loads(cli("memory", "search", memory_id, "what do I drink", "--db", db).stdout)
    assert {m["message_type"] for m in found} == {"raw", "semantic"}
    shown = json.loads(cli("memory", "show", memory_id, "--db", db).stdout)
    assert shown["memory"]["memory_type"] == ["raw", "semantic"] and shown["bytes"] > 0

    assert cli("memory", "delete", memory_id, "--db", db).returncode == 0
    gone = cli("memory", "show", memory_id, "--db", db)
    assert gone.returncode == 2 and f"Memory '{memory_id}' not found." in gone.stderr
    assert "0 memories" in cli("memory", "list", "--db", db).stdout


def test_a_bad_memory_request_is_refused_naming_it(tmp_path):
    refused = cli("memory", "create", "x", "--type", "raw,dreams", "--db", str(tmp_path / "s.db"))
    assert refused.returncode == 2 and "'dreams' is not supported" in refused.stderr
