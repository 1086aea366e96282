"""A server offered to tenants who distrust each other (`serve --allow-local-code`), attacked by one of them.

Mallory holds an ordinary API token and sends DSLs through the compile-and-run API. Her CodeExec
scripts try what a script on the server's machine would want: the server's keys (its environment,
through /proc), the sessions database (every tenant's conversations and token hashes), the server's
own port on 127.0.0.1, a process that outlives her run. Her other components point the connections
a DSL chooses at the server's machine. Alice's data must stay out of reach, the server must keep
serving, and each refusal must say why.
"""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests import forkserver
from tests.conftest import need_sandbox
from tests.events import finished
from tests.runtime.services.test_code_exec import gone, marker
from tests.server.helpers import CLI, CHAT_DSL, REPO, Api, Server, cpn, free_port, make_token

SECRET = "sk-server-key-never-for-tenants-7"
ALICE_NOTE = "alice-private-note-31337"

SURVEY = '''
import os, socket, subprocess

def attempt(action):
    try:
        return {"ok": action()}
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}

def environ_of(pid):
    with open(f"/proc/{pid}/environ", "rb") as f:
        return f.read().decode(errors="replace")

def main(db, port, mark):
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    found = {
        "environs": {pid: attempt(lambda pid=pid: environ_of(pid)) for pid in pids + ["self"]},
        "database": attempt(lambda: open(db, "rb").read(200).hex()),
        "database_dir": attempt(lambda: os.listdir(os.path.dirname(db))),
        "write_beside_database": attempt(lambda: open(db + ".mallory", "w").write("x")),
        "server_port": attempt(lambda: socket.create_connection(("127.0.0.1", port), timeout=3).close()),
    }
    if os.fork() == 0:                      # a daemon to outlive the run
        os.setsid()
        if os.fork() == 0:
            os.execvp("sleep", ["sleep", mark])
        os._exit(0)
    os.wait()
    return found
'''


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    need_sandbox()
    tmp = tmp_path_factory.mktemp("tenants")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_API_KEY", SECRET)              # the server's own keys, in its environment
        mp.setenv("CANVAS2GRAPH_TEST_SECRET", SECRET)
        mp.setenv("CANVAS2GRAPH_CODE_TIMEOUT", "5")        # the operator's limit for every tenant's script
        for name in ("CANVAS2GRAPH_SANDBOX_URL", "CANVAS2GRAPH_BWRAP", "CANVAS2GRAPH_ALLOW_LOCAL_CODE"):
            mp.delenv(name, raising=False)
        for name in ("INVOKE", "CRAWLER", "SEARXNG", "EMAIL", "EXESQL", "MCP"):
            mp.delenv(f"CANVAS2GRAPH_{name}_ALLOW_PRIVATE", raising=False)
        db = str(tmp / "server.db")
        with Server(db, tmp, None, "--allow-local-code") as running:
            yield running


@pytest.fixture(scope="module")
def alice(server):
    api = Api(server, make_token(server.db, "alice"))
    # graph sessions get ids the server chooses (a client's could tell another tenant's ids apart)
    api.session_id = api.ok("POST", "/graphs/run", {"dsl": CHAT_DSL, "query": ALICE_NOTE, "stream": False})["session_id"]
    yield api
    api.close()


@pytest.fixture(scope="module")
def mallory(server):
    api = Api(server, make_token(server.db, "mallory"))
    yield api
    api.close()


def code_dsl(script: str, arguments: dict) -> dict:
    """Begin (with the arguments as conversation variables) -> CodeExec -> Message."""
    return {"components": {
        "begin": cpn("Begin", {}, ["CodeExec:C"]),
        "CodeExec:C": cpn("CodeExec", {"lang": "python", "script": script,
                                       "arguments": {name: f"sys.{name}" for name in arguments},
                                       "outputs": {"found": {"type": "Object", "value": {}}}}, ["Message:M"]),
        "Message:M": cpn("Message", {"content": ["done"]}),
    }, "globals": {f"sys.{name}": value for name, value in arguments.items()}}


def test_a_tenants_script_reaches_neither_the_servers_secrets_nor_other_tenants_data(server, alice, mallory):
    mark = marker()
    arguments = {"db": server.db, "port": server.port, "mark": mark}
    events = mallory.stream("/graphs/run", {"dsl": code_dsl(SURVEY, arguments), "query": "survey"})
    [done] = finished(events, "CodeExec:C")
    assert not done.get("error"), done
    found = done["outputs"]["found"]
    everything = str(found)
    assert SECRET not in everything and ALICE_NOTE not in everything
    assert found["database"]["error"].startswith("FileNotFoundError")
    assert found["database_dir"]["error"].startswith("FileNotFoundError")
    assert found["write_beside_database"]["error"].startswith(("FileNotFoundError", "OSError"))
    assert not os.path.exists(server.db + ".mallory")
    assert found["server_port"]["error"].startswith("ConnectionRefusedError")
    assert len(found["environs"]) <= 6                    # her sandbox's own processes, nothing of the server's
    assert gone_now(mark)
    # the server is unharmed, and Alice's session still answers
    reply = alice.ok("POST", "/graphs/run", {"dsl": CHAT_DSL, "query": "again", "session_id": alice.session_id,
                                             "stream": False})
    assert reply["data"]["content"]


def gone_now(mark: str) -> bool:
    import asyncio
    return asyncio.run(gone(mark))


def test_a_fork_bomb_from_a_tenant_is_stopped_and_the_server_keeps_serving(server, alice, mallory):
    bomb = ("import os\ndef main(mark):\n    for _ in range(5000):\n        if os.fork() == 0:\n"
            "            os.execvp('sleep', ['sleep', mark])\n")
    mark = marker()
    events = mallory.stream("/graphs/run", {"dsl": code_dsl(bomb, {"mark": mark}), "query": "boom"})
    [done] = finished(events, "CodeExec:C")
    assert "Resource temporarily unavailable" in done["error"]
    assert gone_now(mark)
    assert alice.ok("POST", "/graphs/run", {"dsl": CHAT_DSL, "query": "still there?", "stream": False})["data"]["content"]


def test_a_script_that_never_ends_is_stopped_at_the_time_limit(server, mallory):
    mark = marker()
    forever = "import subprocess, time\ndef main(mark):\n    subprocess.Popen(['sleep', mark])\n    time.sleep(3600)\n"
    events = mallory.stream("/graphs/run", {"dsl": code_dsl(forever, {"mark": mark}), "query": "wait"})
    ended = finished(events, "CodeExec:C")
    assert len(ended) == 1, json.dumps(events)[-1500:]      # the events, when the stream ended without its end
    [done] = ended
    assert done["error"] == "Execution timed out after 5 s"
    assert gone_now(mark)


@pytest.mark.parametrize("component, params, words", [
    ("Invoke", {"url": "http://127.0.0.1:{port}/api/v1/agents", "method": "get"}, "CANVAS2GRAPH_INVOKE_ALLOW_PRIVATE=1"),
    ("Invoke", {"url": "http://169.254.169.254/latest/meta-data/", "method": "get"}, "169.254.169.254 is a private"),
    ("Crawler", {"query": "http://127.0.0.1:{port}/health"}, "CANVAS2GRAPH_CRAWLER_ALLOW_PRIVATE=1"),
    ("SearXNG", {"query": "sys.query", "searxng_url": "http://127.0.0.1:{port}"}, "CANVAS2GRAPH_SEARXNG_ALLOW_PRIVATE=1"),
    ("Email", {"smtp_server": "127.0.0.1", "smtp_port": 25, "email": "m@example.com", "password": "x",
               "sender_name": "M", "to_email": "sys.query"}, "CANVAS2GRAPH_EMAIL_ALLOW_PRIVATE=1"),
    ("ExeSQL", {"db_type": "postgres", "host": "127.0.0.1", "port": 5432, "username": "postgres",
                "database": "test", "sql": "sys.query"}, "CANVAS2GRAPH_EXESQL_ALLOW_PRIVATE=1"),
])
def test_connections_a_tenants_dsl_chooses_cannot_reach_the_servers_machine(server, mallory, component, params, words):
    params = {k: v.format(port=server.port) if isinstance(v, str) else v for k, v in params.items()}
    dsl = {"components": {"begin": cpn("Begin", {}, [f"{component}:X"]),
                          f"{component}:X": cpn(component, params, ["Message:M"]),
                          "Message:M": cpn("Message", {"content": ["done"]})}}
    events = mallory.stream("/graphs/run", {"dsl": dsl, "query": "someone@example.com"})
    [done] = finished(events, f"{component}:X")
    assert "is a private, loopback or otherwise non-public address" in done["error"] and words in done["error"]


def test_the_crawlers_proxy_cannot_be_the_servers_machine(server, mallory):
    dsl = {"components": {"begin": cpn("Begin", {}, ["Crawler:X"]),
                          "Crawler:X": cpn("Crawler", {"query": "http://169.254.169.254/latest/meta-data/",
                                                       "proxy": server.url}, ["Message:M"]),
                          "Message:M": cpn("Message", {"content": ["done"]})}}
    events = mallory.stream("/graphs/run", {"dsl": dsl, "query": "x"})
    [done] = finished(events, "Crawler:X")
    assert "is a private, loopback or otherwise non-public address" in done["error"]


def test_a_server_without_a_sandbox_refuses_to_offer_local_code(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "CANVAS2GRAPH_BWRAP": "no-such-bwrap"}
    env.pop("CANVAS2GRAPH_SANDBOX_URL", None)
    done = subprocess.run([*forkserver.python(), *CLI[1:], "serve", "--port", str(free_port()), "--db", str(tmp_path / "s.db"),
                                 "--allow-local-code"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "--allow-local-code runs scripts in a sandbox on this machine, and there is none" in done.stderr
    assert "install bubblewrap" in done.stderr
