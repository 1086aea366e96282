"""Scale benchmark of production's layout: API processes and workers on one PostgreSQL, K conversations at once.

    python -m bench.scale                    # 1, 2 and 4 workers x 100 and 1,000 conversations, takeover, 10 kills
    python -m bench.scale --quick            # a smoke run: 20 conversations, 1 and 2 workers, 2 kills (about 3 min)
    python -m bench.scale --json scale.json  # also write every figure
    python -m bench.scale --db postgresql://postgres@127.0.0.1:5432    # the server to make the run's database on

Two API processes (`canvas2graph serve --workers 0`) and W workers (`canvas2graph worker --concurrency C`) run
on a database of their own (`c2g_bench_<hex>`, created for the run and dropped after it) with a queue of their
own. The agent is begin -> LLM -> Message ("<query> => <answer>": an answer says which question it answers).
Its model is the scripted model with a fixed latency: every reply streams `--tokens` chunks spread over
`--model-ms`, and (as in `bench.server_load`) each chunk's text is the wall-clock time (ns) at which the model
handed it over, the first one also when the model was called, so a client knows where a turn's time went.

Client processes (`--clients`) hold K conversations; each starts at a random moment of the first period (so
turns arrive at a steady rate, not all at once), then asks one turn after another (`POST
/api/v1/agents/chat/completions`, streamed; turn n of conversation i through API process (i + n) mod 2), with
`--think-ms` (20 s, a chat's pace; 0.5x to 1.5x, at random) between its turns, for `--seconds` after that
first period. A conversation has one turn at a time: more conversations than the machine can serve show as
turns/s at its capacity and latencies of queued turns. For every turn asked in that window:
- added latency = (request sent -> `data:[DONE]` arrived) - the model's scripted time; split into pickup
  (request sent -> model called), model overrun (the model's own pauses overslept: its worker's loop was
  busy) and tail (last token left the model -> `[DONE]`);
- turns/s: turns finished in the window per second; CPU per turn: the CPU the API processes and workers
  (and, apart, the database's server processes of the run's database) used in the window per turn.

Then the floor (bench/scale_floor.py): the same turn in plain LangGraph, one process on LangGraph's own
PostgreSQL saver, no HTTP or queue; its CPU per turn is printed beside the busiest run's, as a ratio, each with
the turns/s and conversations the machine's cores would serve at that cost.

Then, with the last set of workers:
- takeover (`--takeovers` times): a turn whose model streams for 10 s; once a few tokens reached the client,
  the worker running it is SIGKILLed (another one is alive); measured from the kill to the first token the
  new worker's model emits reaching the client, and to `workflow_finished`. The stream must end with
  `workflow_finished` and the session hold the question and the answer once;
- kills: `--kill-conversations` conversations ask turns back to back while `--kills` workers, chosen at
  random, are SIGKILLed at random moments (each restarted at once, as a supervisor does; the next kill 1 to
  4 s after the dead worker's turns were taken up and had the model's time to end: a turn on three killed
  workers is failed by design, MAX_ATTEMPTS); then every session's log must hold every question it was asked
  and its answer ("<query>=>...") exactly once, and every client stream must end whole: lost and duplicated
  turns are counted.

Pass (exit status 0; 1 otherwise): no errors in any run; at the largest K (1,000), p99 added latency
<= `--p99-limit-ms` (100) with at least one of the worker counts; every takeover within `--takeover-limit-s`
(30); 0 lost and 0 duplicated turns. The machine's load average is printed with each run: other work on the
machine shows in the figures.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

if __package__ in (None, ""):          # `python bench/scale.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.server_load import _cpu_s, _free_port, _percentile, _post_stream

REPO = Path(__file__).resolve().parent.parent
CHAT = "/api/v1/agents/chat/completions"
SERVER = "postgresql://postgres@127.0.0.1:5432"
DSL = {"components": {
    "begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": ["LLM:A"]},
    "LLM:A": {"obj": {"component_name": "LLM", "params": {
        "llm_id": "bench@OpenAI", "prompts": [{"role": "user", "content": "{sys.query}"}]}}, "downstream": ["Message:M"]},
    "Message:M": {"obj": {"component_name": "Message", "params": {"content": ["{sys.query} => {LLM:A@content}"]}},
                  "downstream": []},
}}
SLOW = "slow"                       # a query starting with this gets the takeover's long answer
STAMP = re.compile(r"(s?)(\d{18,20})")


# --- the processes ------------------------------------------------------------------------------------
def stamped_cli(argv: list[str]) -> int:
    """`canvas2graph <argv>` (a worker) whose scripted model stamps every streamed chunk: its text is the time
    (ns) it left the model, the first chunk's preceded by "s<time the model was called>"."""
    from canvas2graph.runtime.services.scripted import ScriptedChatModel
    original = ScriptedChatModel._astream

    async def _astream(self, messages, stop=None, run_manager=None, **kwargs):
        called, first = time.time_ns(), True
        async for chunk in original(self, messages, stop, run_manager, **kwargs):
            if chunk.message.content:           # the moment the chunk leaves the model
                chunk.message.content = (f"s{called} " if first else "") + f"{time.time_ns()} "
                first = False
            yield chunk

    ScriptedChatModel._astream = _astream
    from canvas2graph.cli import main as cli_main
    return cli_main(argv)


def _env() -> dict:
    # the repository first; a PYTHONPATH the caller set is kept after it
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}


class Process:
    """A `serve` or `worker` process, with its log file."""

    def __init__(self, kind: str, cmd: list[str], port: int, log: Path):
        self.kind, self.port, self.log = kind, port, log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(cmd, cwd=REPO, env=_env(), stdout=out, stderr=subprocess.STDOUT)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 120) -> Process:
        import httpx
        probe = "/health" if self.kind == "api" else "/ready"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the {self.kind} exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                if httpx.get(self.url + probe, timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.kill()
        raise RuntimeError(f"the {self.kind} was not ready within {timeout:.0f} s:\n{self.tail()}")

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()


class Cluster:
    """The run's database, its API processes and workers."""

    def __init__(self, args: argparse.Namespace, tmp: Path):
        import psycopg
        self.args, self.tmp = args, tmp
        tag = uuid.uuid4().hex[:10]
        self.dbname, self.queue = f"c2g_bench_{tag}", f"bench-{tag}"
        self.server = args.db.rstrip("/")
        with psycopg.connect(self.server + "/postgres", autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {self.dbname}")
        self.url = f"{self.server}/{self.dbname}"
        self.script = tmp / "script.json"
        self.script.write_text(json.dumps(script(args)))
        self.apis: list[Process] = []
        self.workers: list[Process] = []
        self.monitor = None
        self.db_conn = None
        self.token = subprocess.run([sys.executable, "-m", "canvas2graph.cli", "tokens", "create", "--tenant", "bench",
                                     "--db", self.url], cwd=REPO, env=_env(), capture_output=True, text=True,
                                    check=True).stdout.strip()

    def _log(self, kind: str) -> Path:
        return self.tmp / f"{kind}-{uuid.uuid4().hex[:6]}.log"

    def start_apis(self, n: int = 2) -> None:
        """The first one alone (it applies the job engine's schema), then the others."""
        for i in range(n):
            port = _free_port()
            self.apis.append(Process("api", [
                sys.executable, "-m", "canvas2graph.cli", "serve", "--workers", "0", "--db", self.url, "--port", str(port),
                "--queue", self.queue, "--pool-size", str(self.args.api_pool_size), "--log-level", "warning"],
                port, self._log("api")))
            if i == 0:
                self.apis[0].wait_ready()
        for api in self.apis:
            api.wait_ready()

    def start_workers(self, n: int, concurrency: int, pool_size: int) -> list[Process]:
        started = []
        for _ in range(n):
            port = _free_port()
            started.append(Process("worker", [
                sys.executable, "-m", "bench.scale", "--stamped-cli", "worker", "--db", self.url,
                "--llm-script", str(self.script), "--queue", self.queue, "--concurrency", str(concurrency),
                "--pool-size", str(pool_size), "--health-port", str(port), "--log-level", "warning"],
                port, self._log("worker")))
        for worker in started:
            worker.wait_ready()
        self.workers += started
        return started

    def worker_options(self, workers: int | None = None) -> tuple[int, int]:
        """(concurrency, pool size) of each of `workers` workers (default: as many as run now): room for the
        largest K among them."""
        w = max(1, workers or len(self.workers))
        return max(256, -(-max(self.args.conversations) * 5 // 4 // w)), max(8, self.args.worker_pool_total // w)

    def processes(self) -> list[Process]:
        return [*self.apis, *(w for w in self.workers if w.proc.poll() is None)]

    def backend_pids(self) -> list[int]:
        """The database's server processes serving the run's database (on a connection the run keeps: the server
        may have no other to give when it is busy)."""
        import psycopg
        if self.monitor is None or self.monitor.closed:
            self.monitor = psycopg.connect(self.server + "/postgres", autocommit=True)
        return [r[0] for r in self.monitor.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s",
                                                   (self.dbname,))]

    def query(self, sql: str, params: tuple) -> tuple | None:
        """One row from the run's database, on a connection the run keeps."""
        import psycopg
        if self.db_conn is None or self.db_conn.closed:
            self.db_conn = psycopg.connect(self.url, autocommit=True)
        return self.db_conn.execute(sql, params).fetchone()

    def connections_free(self) -> tuple[int, int]:
        """(connections the server allows, connections in use now)."""
        self.backend_pids()
        limit = int(self.monitor.execute("SHOW max_connections").fetchone()[0])
        used = self.monitor.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
                                    ).fetchone()[0]
        return limit, used

    def close(self) -> None:
        import psycopg
        for process in [*self.workers, *self.apis]:
            process.kill()
        for conn in (self.monitor, self.db_conn):
            if conn is not None:
                conn.close()
        if self.args.keep:
            print(f"database {self.url} kept")
            return
        try:
            with psycopg.connect(self.server + "/postgres", autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {self.dbname} WITH (FORCE)")
        except Exception as e:      # noqa: BLE001 - say so; the run's figures stand
            print(f"could not drop database {self.dbname}: {e}", file=sys.stderr)


def script(args: argparse.Namespace) -> dict:
    """The scripted model: `--tokens` chunks over `--model-ms`; a question starting with SLOW is answered in
    `--takeover-model-s` (40 chunks)."""
    interval = args.model_ms / args.tokens
    slow_pause = args.takeover_model_s * 1000 / 40
    return {"auto_reply": " ".join(["w"] * args.tokens), "stream_chunks": args.tokens, "chunk_interval_ms": interval,
            "by_message": [{"match": f"^{SLOW}", "reply": {"content": "", "chunks": [
                {"content": "w ", "delay_ms": max(0.0, slow_pause - interval)} for _ in range(40)]}}]}


# --- CPU -----------------------------------------------------------------------------------------------
def _tree_cpu_s(pid: int) -> float:
    """A process's CPU with its children's: its own and what it waited for, and its live children's."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    total = sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    for child in _children(pid):
        total += _tree_cpu_s(child)
    return total


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return found


def _pg_cpu(pids: list[int]) -> dict[int, float]:
    out = {}
    for pid in pids:
        try:
            out[pid] = _cpu_s(pid)
        except OSError:
            pass
    return out


# --- the client processes ------------------------------------------------------------------------------
async def _json_post(url: str, token: str, path: str, body: dict) -> dict:
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    status, chunks = await _post_stream(host, int(port), path, token, body)
    data = b"".join([piece async for _t, piece in chunks])
    reply = json.loads(data)
    if status != 200 or reply.get("code") != 0:
        raise RuntimeError(f"HTTP {status}: {data[:200]!r}")
    return reply["data"]


async def turn(url: str, token: str, agent: str, sid: str, query: str) -> dict:
    """One streamed turn: when it was sent, when its events came, what its tokens' stamps say; `error` when
    it went wrong."""
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    rec: dict = {"query": query, "sent": time.time_ns(), "tokens": [], "error": None}
    text, buffer = "", b""
    try:
        status, body = await _post_stream(host, int(port), CHAT, token,
                                          {"agent_id": agent, "session_id": sid, "query": query, "stream": True})
        if status != 200:
            rec["error"] = f"HTTP {status}: {b''.join([p async for _t, p in body])[:200]!r}"
            return rec
        async for arrived, data in body:
            buffer += data
            *frames, buffer = buffer.split(b"\n\n")
            for frame in frames:
                if frame == b"data:[DONE]":
                    rec["done"] = arrived
                    continue
                event = json.loads(frame[5:])
                if event.get("code"):
                    rec["error"] = f"error event: {event.get('message')}"
                    continue
                kind = event.get("event")
                if kind == "message":
                    content = event["data"].get("content") or ""
                    text += content
                    for called, stamp in STAMP.findall(content):
                        if called:
                            rec.setdefault("called", int(stamp))
                        else:
                            rec["tokens"].append((int(stamp), arrived))
                elif kind == "workflow_finished":
                    rec["finished"] = arrived
                    outputs = (event.get("data") or {}).get("outputs")
                    if isinstance(outputs, str) and outputs:    # an error or a cancel says so here
                        rec["outputs"] = outputs[:200]
    except Exception as e:          # noqa: BLE001 - every failure is counted, none stops the run
        rec["error"] = f"{type(e).__name__}: {e}"
    if rec["error"] is None:
        if "done" not in rec:
            rec["error"] = "the stream ended without data:[DONE]"
        elif "finished" not in rec:
            rec["error"] = "the stream had no workflow_finished"
        elif not text.startswith(f"{query}=>"):
            rec["error"] = f"answered {text[:60]!r}, not {query!r}"
    return rec


async def _conversations(args: argparse.Namespace) -> dict:
    urls = args.urls.split(",")
    stop_file = Path(args.stop_file) if args.stop_file else None
    deadline = args.deadline or float("inf")
    sessions: dict[int, str] = {}
    turns: list[dict] = []
    errors: list[str] = []

    async def converse(i: int) -> None:
        await asyncio.sleep(max(0.0, args.start_at + random.uniform(0, args.ramp) - time.time()))
        try:
            sid = (await _json_post(urls[i % len(urls)], args.token, f"/api/v1/agents/{args.agent}/sessions", {}))["id"]
        except Exception as e:      # noqa: BLE001
            errors.append(f"conversation {i}: no session: {e}")
            return
        sessions[i] = sid
        n = 0
        while time.time() < deadline and not (stop_file and stop_file.exists()):
            rec = await turn(urls[(i + n) % len(urls)], args.token, args.agent, sid, f"c{i}-t{n}-{args.tag}")
            rec["conversation"] = i
            turns.append(rec)
            n += 1
            if args.think_ms:
                await asyncio.sleep(args.think_ms / 1000 * random.uniform(0.5, 1.5))

    first = args.first
    await asyncio.gather(*[converse(i) for i in range(first, first + args.conversations)])
    return {"sessions": sessions, "turns": turns, "errors": errors}


def client(args: argparse.Namespace) -> None:
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    result = asyncio.run(_conversations(args))
    Path(args.out).write_text(json.dumps(result))         # a file: a pipe would take it only in pieces


def run_clients(cluster: Cluster, agent: str, conversations: int, *, start_at: float, ramp: float,
                deadline: float | None, think_ms: float, tag: str, stop_file: Path | None = None,
                clients: int | None = None) -> list[subprocess.Popen]:
    clients = max(1, min(clients or cluster.args.clients, conversations))
    shares = [conversations // clients + (i < conversations % clients) for i in range(clients)]
    procs, first = [], 0
    for share in shares:
        out = cluster.tmp / f"client-{uuid.uuid4().hex[:8]}.json"
        cmd = [sys.executable, "-m", "bench.scale", "--client", "--out", str(out), "--urls", ",".join(a.url for a in cluster.apis),
               "--token", cluster.token, "--agent", agent, "--conversations-share", str(share), "--first", str(first),
               "--start-at", repr(start_at), "--ramp", repr(ramp), "--think-ms", repr(think_ms), "--tag", tag]
        if deadline is not None:
            cmd += ["--deadline", repr(deadline)]
        if stop_file is not None:
            cmd += ["--stop-file", str(stop_file)]
        procs.append(subprocess.Popen(cmd, cwd=REPO, env=_env()))
        procs[-1].out = out
        first += share
    return procs


def gather(procs: list[subprocess.Popen], timeout: float) -> dict:
    merged: dict = {"sessions": {}, "turns": [], "errors": []}
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            merged["errors"].append("a client process did not finish in time")
        if not proc.out.exists():
            merged["errors"].append(f"a client process exited with {proc.returncode} and no figures")
            continue
        data = json.loads(proc.out.read_text())
        merged["sessions"].update({int(k): v for k, v in data["sessions"].items()})
        merged["turns"] += data["turns"]
        merged["errors"] += data["errors"]
    return merged


def create_agent(cluster: Cluster) -> str:
    import httpx
    reply = httpx.post(cluster.apis[0].url + "/api/v1/agents", json={"title": f"scale-{uuid.uuid4().hex[:6]}", "dsl": DSL},
                       headers={"Authorization": f"Bearer {cluster.token}"}, timeout=60).json()
    assert reply["code"] == 0, reply
    return reply["data"]["id"]


# --- one load run ---------------------------------------------------------------------------------------
def _ms(ns: float) -> float:
    return ns / 1e6


def _pcts(values: list[float]) -> dict | None:
    if not values:
        return None
    return {"p50": _percentile(values, 50), "p99": _percentile(values, 99), "max": max(values)}


def load_run(cluster: Cluster, agent: str, conversations: int) -> dict:
    args = cluster.args
    ramp = (args.model_ms + args.think_ms) / 1000
    start_at = time.time() + 3                          # the client processes start meanwhile
    window = (start_at + ramp, start_at + ramp + args.seconds)
    load_before = os.getloadavg()
    procs = run_clients(cluster, agent, conversations, start_at=start_at, ramp=ramp, deadline=window[1],
                        think_ms=args.think_ms, tag=f"k{conversations}w{len(cluster.workers)}")
    time.sleep(max(0.0, window[0] - time.time()))
    watched = cluster.processes()
    backends = cluster.backend_pids()
    cpu0 = {p.pid: _tree_cpu_s(p.pid) for p in watched}
    clients0 = {p.pid: _tree_cpu_s(p.pid) for p in procs}
    pg0 = _pg_cpu(backends)
    time.sleep(max(0.0, window[1] - time.time()))
    cpu1 = {p.pid: _tree_cpu_s(p.pid) for p in watched}
    clients1 = {p.pid: _tree_cpu_s(p.pid) for p in procs}
    backends = set(backends) | set(cluster.backend_pids())
    pg1 = _pg_cpu(list(backends))
    load_during = os.getloadavg()
    out = gather(procs, timeout=args.seconds + ramp + 900)       # an overloaded run drains its turns
    if args.keep:                                       # every turn's figures, beside the logs
        (cluster.tmp / f"turns-w{len(cluster.workers)}-k{conversations}.json").write_text(json.dumps(out))
    model_ns = args.model_ms * 1e6
    start_ns, end_ns = window[0] * 1e9, window[1] * 1e9
    measured = [t for t in out["turns"] if start_ns <= t["sent"] < end_ns]
    ok = [t for t in measured if t["error"] is None and "done" in t]
    errors = [f"{t['query']}: {t['error']}" for t in out["turns"] if t["error"]] + out["errors"]
    finished = sum(1 for t in out["turns"] if t["error"] is None and start_ns <= t["done"] < end_ns)
    added = [_ms(t["done"] - t["sent"] - model_ns) for t in ok]
    pickup = [_ms(t["called"] - t["sent"]) for t in ok if "called" in t]
    overrun = [_ms(t["tokens"][-1][0] - t["called"] - model_ns) for t in ok if "called" in t and t["tokens"]]
    tail = [_ms(t["done"] - t["tokens"][-1][0]) for t in ok if t["tokens"]]
    delays = [_ms(arrived - emitted) for t in ok for emitted, arrived in t["tokens"]]
    short = [t["query"] for t in ok if len(t["tokens"]) != args.tokens]
    errors += [f"{q}: not every token arrived" for q in short]
    c2g_cpu = sum(cpu1[p] - cpu0[p] for p in cpu0)
    api_cpu = sum(cpu1[p.pid] - cpu0[p.pid] for p in watched if p.kind == "api")
    pg_cpu = sum(pg1[p] - pg0.get(p, 0.0) for p in pg1)
    client_cpu = sum(clients1[p] - clients0[p] for p in clients0)
    per_turn = lambda cpu: cpu * 1000 / finished if finished else float("nan")
    return {
        "workers": len(cluster.workers), "conversations": conversations, "window_s": args.seconds,
        "turns_measured": len(measured), "turns_finished_in_window": finished, "turns_per_s": finished / args.seconds,
        "errors": len(errors), "error_samples": errors[:5],
        "added_ms": _pcts(added), "pickup_ms": _pcts(pickup), "model_overrun_ms": _pcts(overrun), "tail_ms": _pcts(tail),
        "token_delay_ms": _pcts(delays),
        "cpu_ms_per_turn": {"canvas2graph": per_turn(c2g_cpu), "api": per_turn(api_cpu),
                            "workers": per_turn(c2g_cpu - api_cpu), "postgresql": per_turn(pg_cpu),
                            "clients": per_turn(client_cpu)},
        "cpu_busy": {"canvas2graph": c2g_cpu / args.seconds, "postgresql": pg_cpu / args.seconds,
                     "clients": client_cpu / args.seconds},
        "load_average": {"before": load_before[0], "during": load_during[0]},
    }


def print_load_header() -> None:
    print("| workers | K | turns/s | added p50 / p99 ms | pickup p50 / p99 | tail p50 / p99 | token delay p99 | "
          "CPU ms/turn (API + workers / PostgreSQL) | errors | load |")
    print("|---|---|---|---|---|---|---|---|---|---|")


def print_load_errors(r: dict) -> None:
    for sample in r["error_samples"]:
        print(f"  error: {sample[:200]}")


def print_load_row(r: dict) -> None:
    def pair(key: str) -> str:
        v = r[key]
        return f"{v['p50']:.0f} / {v['p99']:.0f}" if v else "-"
    cpu, delay = r["cpu_ms_per_turn"], r["token_delay_ms"]
    print(f"| {r['workers']} | {r['conversations']} | {r['turns_per_s']:.1f} | {pair('added_ms')} | {pair('pickup_ms')} | "
          f"{pair('tail_ms')} | {delay['p99'] if delay else float('nan'):.0f} ms | {cpu['api']:.1f} + {cpu['workers']:.1f} / "
          f"{cpu['postgresql']:.1f} | {r['errors']} | {r['load_average']['during']:.1f} |", flush=True)


# --- takeover ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--stamped-cli"]:
        return stamped_cli(argv[1:])
    p = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a smoke run: 20 conversations, 1 and 2 workers, 2 kills")
    p.add_argument("--workers", default=None, help="worker counts, in increasing order (default 1,2,4)")
    p.add_argument("--conversations", default=None, help="conversation counts K (default 100,1000)")
    p.add_argument("--model-ms", type=float, default=2000, help="the model's time per reply (default %(default)s)")
    p.add_argument("--tokens", type=int, default=20, help="chunks per reply (default %(default)s)")
    p.add_argument("--think-ms", type=float, default=None,
                   help="a user's pause between turns (default 20000; --quick: 5000)")
    p.add_argument("--seconds", type=float, default=None, help="measured seconds per run (default 60)")
    p.add_argument("--clients", type=int, default=2, help="client processes sharing the conversations")
    p.add_argument("--takeovers", type=int, default=None, help="takeovers measured (default 3)")
    p.add_argument("--takeover-model-s", type=float, default=10.0, help="the takeover turn's model time")
    p.add_argument("--kills", type=int, default=None, help="random worker SIGKILLs (default 10)")
    p.add_argument("--kill-conversations", type=int, default=None, help="conversations during the kills (default 40)")
    p.add_argument("--api-pool-size", type=int, default=8, help="each API process's --pool-size")
    p.add_argument("--worker-pool-total", type=int, default=32,
                   help="the workers' --pool-size, in all (each gets its share, at least 8)")
    p.add_argument("--db", default=SERVER, help="the PostgreSQL server (a database is made on it for the run)")
    p.add_argument("--p99-limit-ms", type=float, default=100)
    p.add_argument("--takeover-limit-s", type=float, default=30)
    p.add_argument("--keep", action="store_true", help="keep the processes' logs, every turn's figures and the database")
    p.add_argument("--json", help="also write the figures to this file")
    p.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--urls", help=argparse.SUPPRESS)
    p.add_argument("--token", help=argparse.SUPPRESS)
    p.add_argument("--agent", help=argparse.SUPPRESS)
    p.add_argument("--conversations-share", type=int, help=argparse.SUPPRESS)
    p.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--start-at", type=float, help=argparse.SUPPRESS)
    p.add_argument("--ramp", type=float, default=0.0, help=argparse.SUPPRESS)
    p.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    p.add_argument("--stop-file", help=argparse.SUPPRESS)
    p.add_argument("--tag", default="", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.client:
        args.conversations = args.conversations_share
        args.think_ms = args.think_ms or 0.0
        client(args)
        return 0
    quick = args.quick
    args.workers = [int(x) for x in (args.workers or ("1,2" if quick else "1,2,4")).split(",")]
    args.conversations = [int(x) for x in (args.conversations or ("20" if quick else "100,1000")).split(",")]
    args.think_ms = (5000.0 if quick else 20000.0) if args.think_ms is None else args.think_ms
    args.seconds = args.seconds or (15.0 if quick else 60.0)
    args.takeovers = args.takeovers if args.takeovers is not None else (1 if quick else 3)
    args.kills = args.kills if args.kills is not None else (2 if quick else 10)
    args.kill_conversations = args.kill_conversations or (10 if quick else 40)
    if args.workers != sorted(args.workers) or args.workers[0] < 1:
        p.error("--workers: counts of 1 or more, in increasing order")
    from bench.scale_faults import run  # (it imports this module's parts)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
