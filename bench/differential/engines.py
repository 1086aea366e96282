"""The two engines the differential tester compares, each running a case's turns in one session.

- `Oracle`: RAGFlow's own engine in a long-lived worker process (`oracle_worker.py`, the oracle's
  virtualenv), restarted when a case outruns its time;
- `run_canvas2graph`: canvas2graph in this process, as `canvas2graph run --format jsonl` runs a turn
  (the parity checker's command), on an in-memory checkpointer shared by the case's turns.

Both return one list of RAGFlow events per turn, normalised as the parity checker normalises them.
"""
from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent.parent
HARNESS = Path(os.environ.get("CANVAS2GRAPH_ORACLE_HARNESS", REPO.parent / "shared" / "oracle" / "harness"))
ORACLE_HOME = Path(os.environ.get("ORACLE_HOME", Path.home() / ".cache" / "ragflow-oracle"))
ORACLE_PY = Path(os.environ.get("ORACLE_PY", ORACLE_HOME / "venv" / "bin" / "python"))
WORKER = Path(__file__).resolve().parent / "oracle_worker.py"


def missing() -> str | None:
    """Why RAGFlow's engine cannot run here, or None."""
    if not (HARNESS / "run_oracle.py").exists():
        return f"RAGFlow's oracle is not beside this checkout ({HARNESS} is missing: see ../shared/oracle/README.md)"
    if not ORACLE_PY.exists():
        return f"RAGFlow's engine is not set up ({ORACLE_PY} is missing): run ../shared/oracle/setup.sh"
    return None


class EngineTimeout(Exception):
    pass


class Oracle:
    """RAGFlow's engine in a worker process; `run(case)` -> events per turn."""

    def __init__(self, timeout: float = 60.0):
        self.timeout = timeout
        self.proc: subprocess.Popen | None = None
        self.lines: queue.Queue = queue.Queue()

    def _start(self) -> None:
        env = {**os.environ, "PYTHONPATH": ""}
        env = {k: v for k, v in env.items() if not k.endswith(("_API_KEY", "_TOKEN", "_SECRET_KEY"))}
        self.proc = subprocess.Popen([str(ORACLE_PY), str(WORKER), str(HARNESS)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        self.lines = queue.Queue()
        proc, lines = self.proc, self.lines
        threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout] and None, daemon=True).start()
        self._read(120.0)                          # {"ready": true}: RAGFlow imported

    def _read(self, timeout: float) -> dict:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            self.close()
            raise EngineTimeout(f"RAGFlow's engine gave no answer within {timeout:.0f} s")
        return json.loads(line)

    def run(self, dsl: dict, turns: list[dict]) -> list[list[dict]]:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self.proc.stdin.write(json.dumps({"dsl": dsl, "turns": turns}, ensure_ascii=False) + "\n")
        self.proc.stdin.flush()
        reply = self._read(self.timeout)
        if "error" in reply:
            raise RuntimeError(f"the oracle failed: {reply['error']}")
        return [normalised(events) for events in reply["turns"]]

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def normalised(events: list[dict]) -> list[dict]:
    """The events the parity checker reads (its `read_events`): RAGFlow's kinds, timings as placeholders."""
    check = checker()
    lines = [json.dumps(e, ensure_ascii=False, default=str) for e in events]
    return check.read_events(lines)[0]


_CHECK: Any = None


def checker():
    """tests/parity/check.py (the parity checker, a copy of ../shared/parity/check.py) as a module."""
    global _CHECK
    if _CHECK is None:
        import importlib.util
        spec = importlib.util.spec_from_file_location("parity_check", REPO / "tests" / "parity" / "check.py")
        _CHECK = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(_CHECK)
    return _CHECK


async def _c2g_turns(dsl: dict, turns: list[dict]) -> list[list[dict]]:
    from canvas2graph.compiler.canvas import compile_dsl
    from canvas2graph.runtime.run.checkpoint import open_checkpointer
    from canvas2graph.runtime.services.environment import RunEnvironment, RunSettings
    from canvas2graph.runtime.run.runner import Runner, TurnFailed, TurnRejected, TurnRequest
    compiled = compile_dsl(dsl)
    results: list[list[dict]] = []
    with tempfile.TemporaryDirectory(prefix="differential-") as tmp:
        async with open_checkpointer(":memory:") as saver:
            for n, turn in enumerate(turns):
                script = Path(tmp) / f"script{n}.json"
                script.write_text(json.dumps(turn.get("script", [])), encoding="utf-8")
                environment = RunEnvironment(RunSettings(llm_script=str(script), db=str(Path(tmp) / "s.db"),
                                                         code={"allow_local": False}))
                context = environment.context("differential", compiled.plan.dsl.components)
                runner = Runner(compiled, saver, context.models, context.script, services=context.services)
                events: list[dict] = []
                try:
                    request = TurnRequest(query=turn.get("query") or "", inputs=turn.get("inputs") or None)
                    async for event in runner.run_turn("differential", request):
                        events.append(event)
                except TurnFailed:
                    pass
                except TurnRejected:
                    # a request RAGFlow's server refuses too (a form waits and the request does not answer it):
                    # the case is compared on the turns before it
                    break
                finally:
                    await environment.aclose()
                results.append(normalised(events))
    return results


def run_canvas2graph(dsl: dict, turns: list[dict], timeout: float = 60.0) -> list[list[dict]]:
    """canvas2graph's events per turn for the case (in this process)."""
    async def bounded():
        return await asyncio.wait_for(_c2g_turns(dsl, turns), timeout)
    try:
        return asyncio.run(bounded())
    except asyncio.TimeoutError:
        raise EngineTimeout(f"canvas2graph gave no answer within {timeout:.0f} s") from None


if __name__ == "__main__":          # a quick look: python -m bench.differential.engines CASE_DIR
    case_dir = Path(sys.argv[1])
    spec = json.loads((case_dir / "case.json").read_text())
    d = json.loads((case_dir / "dsl.json").read_text())
    for events in run_canvas2graph(d, spec["turns"]):
        print(checker().sequence(events))
