"""A tracer whose host cannot be reached costs a run one line on stderr, not retries and tracebacks."""
from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from canvas2graph.runtime.services.observability import unreachable
from tests.runtime.services.test_observability import DEMO, DEMO_SCRIPT, QUERY, clean_env
from tests.conftest import REPO


def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (the port was free a moment ago)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("tracer, settings", [
    ("LangSmith", lambda url: {"LANGSMITH_TRACING": "true", "LANGSMITH_API_KEY": "lsv2_x", "LANGSMITH_ENDPOINT": url}),
    ("Langfuse", lambda url: {"LANGFUSE_PUBLIC_KEY": "pk-lf-x", "LANGFUSE_SECRET_KEY": "sk-lf-x", "LANGFUSE_HOST": url}),
])
def test_a_run_whose_tracer_is_unreachable_says_so_in_one_line_and_answers(tmp_path, tracer, settings):
    url = closed_port_url()
    done = subprocess.run([sys.executable, "-m", "canvas2graph.cli", "run", str(DEMO), "--llm-script", str(DEMO_SCRIPT),
                           "--query", QUERY, "--db", str(tmp_path / "s.db"), "--format", "jsonl"],
                          cwd=REPO, env=clean_env(**settings(url)), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0
    assert done.stderr.splitlines() == [f"canvas2graph: {tracer} at {url} cannot be reached (Connection refused): "
                                        "this run is not traced there"]
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[-1]["event"] == "workflow_finished" and "The mean is 14.2" in events[-1]["data"]["outputs"]["content"]


def test_the_probe_tells_a_listening_host_from_a_closed_port_and_an_unknown_name():
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        up = f"http://127.0.0.1:{listening.getsockname()[1]}"
        found = unreachable({"up": up, "closed": closed_port_url(), "unknown": "https://no-such-host.invalid"})
    assert set(found) == {"closed", "unknown"} and found["closed"] == "Connection refused"
