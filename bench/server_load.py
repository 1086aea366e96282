"""Load benchmark of the HTTP server: many concurrent streaming conversations against one server process.

    python -m bench.server_load                      # 200 conversations, 100 tokens each, 20 ms apart
    python -m bench.server_load --conversations 50 --db postgresql://postgres@127.0.0.1:5432/test
    python -m bench.server_load --json server-load.json

One `canvas2graph` server process (uvicorn, the app of `server.create_app`) runs the agent
begin -> LLM -> Message. Its model is the scripted model paced with `chunk_interval_ms`: every reply
streams `--tokens` chunks, `--interval-ms` apart. Each chunk's text is the wall-clock time (ns) at
which the model handed it over, so a client knows when each token left the model. Client processes
(`--clients`) open all conversations at once (`POST /api/v1/agents/chat/completions`, `stream: true`)
and note when each token's bytes arrive: delay = arrival - stamp, on the same machine clock.

Pass: zero errors (every stream is HTTP 200, carries every token and ends with `data:[DONE]`) and
the p99 token delay under `--p99-limit-ms` (50). The exit status is 0 on pass, 1 otherwise.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):          # `python bench/server_load.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

REPO = Path(__file__).resolve().parent.parent
DSL = {"components": {
    "begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": ["LLM:A"]},
    "LLM:A": {"obj": {"component_name": "LLM", "params": {
        "llm_id": "bench@OpenAI", "prompts": [{"role": "user", "content": "{sys.query}"}]}}, "downstream": ["Message:M"]},
    "Message:M": {"obj": {"component_name": "Message", "params": {"content": ["{LLM:A@content}"]}}, "downstream": []},
}}


# --- the server process ----------------------------------------------------------------------------------
def serve(args: argparse.Namespace) -> None:
    """The server with a stamping scripted model: each streamed chunk's text is its emission time."""
    import uvicorn

    from canvas2graph.runtime.services.models import ModelFactory
    from canvas2graph.runtime.services.scripted import Script, ScriptedChatModel
    from canvas2graph.server.app import create_app
    from canvas2graph.server.config import ServerConfig

    class StampedModel(ScriptedChatModel):
        async def _astream(self, messages, stop=None, run_manager=None, **kwargs):
            async for chunk in super()._astream(messages, stop, run_manager, **kwargs):
                if chunk.message.content:      # the moment the chunk leaves the model
                    chunk.message.content = f"{time.time_ns()} "
                yield chunk

    class StampedFactory(ModelFactory):
        def chat_model(self, llm_id, *, component_id=None, gen_conf=None):
            return StampedModel(script=self._script, component_id=component_id)

    script_data = {"auto_reply": " ".join(["token"] * args.tokens), "stream_chunks": args.tokens,
                   "chunk_interval_ms": args.interval_ms}

    def models():
        script = Script.load(dict(script_data))
        return StampedFactory(script=script), script

    app = create_app(ServerConfig(db=args.db), models=models)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", backlog=4096)


# --- the client processes ----------------------------------------------------------------------------------
async def _post_stream(host: str, port: int, path: str, token: str, body: dict):
    """A minimal HTTP/1.1 client for one streamed POST: (status, async iterator of (arrival ns, bytes)).

    The harness must cost little next to the server it measures on the same cores, so it reads the
    chunked body straight off the socket instead of going through a full HTTP client.
    """
    reader, writer = await asyncio.open_connection(host, port, limit=1 << 20)
    payload = json.dumps(body).encode()
    writer.write(f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
                 f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
                 f"Connection: close\r\n\r\n".encode() + payload)
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    chunked = False
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        if name.strip().lower() == "transfer-encoding" and "chunked" in value.lower():
            chunked = True

    async def chunks():
        try:
            while True:
                if chunked:
                    size = int((await reader.readline()).strip() or b"0", 16)
                    if size == 0:
                        return
                    data = (await reader.readexactly(size + 2))[:-2]
                else:
                    data = await reader.read(65536)
                    if not data:
                        return
                yield time.time_ns(), data
        finally:
            writer.close()

    return status, chunks()


async def _conversation(url: str, token: str, agent_id: str, tokens: int, delays: list[float],
                        starts: list[float]) -> str | None:
    """One streamed conversation; None when it went well, else what went wrong."""
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    began = time.time_ns()
    seen, buffer, done = 0, b"", False
    try:
        status, body = await _post_stream(host, int(port), "/api/v1/agents/chat/completions", token,
                                          {"agent_id": agent_id, "query": "go", "stream": True})
        if status != 200:
            return f"HTTP {status}"
        async for arrived, data in body:
            buffer += data
            *frames, buffer = buffer.split(b"\n\n")
            for frame in frames:
                if frame == b"data:[DONE]":
                    done = True
                    continue
                event = json.loads(frame[5:])
                if event.get("code"):
                    return f"error event: {event.get('message')}"
                if event.get("event") == "message":
                    for stamp in event["data"]["content"].split():
                        if seen == 0:
                            starts.append((arrived - began) / 1e6)
                        delays.append((arrived - int(stamp)) / 1e6)
                        seen += 1
    except Exception as e:      # noqa: BLE001 - every failure is counted, none stops the run
        return f"{type(e).__name__}: {e}"
    if not done:
        return "the stream ended without data:[DONE]"
    if seen != tokens:
        return f"{seen} of {tokens} tokens arrived"
    return None


async def _clients(args: argparse.Namespace) -> dict:
    delays: list[float] = []
    starts: list[float] = []
    results = await asyncio.gather(*[_conversation(args.url, args.token, args.agent, args.tokens, delays, starts)
                                     for _ in range(args.conversations)])
    errors = [r for r in results if r]
    return {"delays": delays, "starts": starts, "errors": errors}


def client(args: argparse.Namespace) -> None:
    print(json.dumps(asyncio.run(_clients(args))))


# --- the driver ----------------------------------------------------------------------------------------
def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def _rss_mb(pid: int) -> float:
    """A process's resident memory (VmRSS), MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _cpu_s(pid: int) -> float:
    """A process's user + system CPU time so far, seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _db_mb(db: str) -> float | None:
    """The SQLite database's size with its WAL, MB (None for PostgreSQL)."""
    if db.startswith("postgres"):
        return None
    return sum(Path(db + suffix).stat().st_size for suffix in ("", "-wal") if Path(db + suffix).exists()) / 2**20


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _token(db: str) -> str:
    from canvas2graph.server.backend.store import open_store
    async with open_store(db) as store:
        return (await store.create_token("bench"))[1]


def run(args: argparse.Namespace) -> int:
    import httpx

    tmp = Path(tempfile.mkdtemp(prefix="c2g-server-load-"))
    db = args.db or str(tmp / "bench.db")
    token = asyncio.run(_token(db))
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    server = subprocess.Popen([sys.executable, "-m", "bench.server_load", "--serve", "--port", str(port), "--db", db,
                               "--tokens", str(args.tokens), "--interval-ms", str(args.interval_ms)], cwd=REPO, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("the server did not start")
            time.sleep(0.2)
        agent = httpx.post(url + "/api/v1/agents", json={"title": f"load-{port}", "dsl": DSL},
                           headers={"Authorization": f"Bearer {token}"}).json()["data"]["id"]
        rss_before, cpu_before = _rss_mb(server.pid), _cpu_s(server.pid)
        shares = [args.conversations // args.clients + (i < args.conversations % args.clients) for i in range(args.clients)]
        began = time.monotonic()
        procs = [subprocess.Popen([sys.executable, "-m", "bench.server_load", "--client", "--url", url, "--token", token,
                                   "--agent", agent, "--conversations", str(n), "--tokens", str(args.tokens)],
                                  cwd=REPO, env=env, stdout=subprocess.PIPE, text=True) for n in shares if n]
        outputs = [json.loads(p.communicate()[0]) for p in procs]
        wall = time.monotonic() - began
        time.sleep(1)                       # the server finishes its last turns' bookkeeping
        rss_after, server_cpu = _rss_mb(server.pid), _cpu_s(server.pid) - cpu_before
        db_mb = _db_mb(db)
    finally:
        server.terminate()
        server.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)
    delays = [d for o in outputs for d in o["delays"]]
    starts = [s for o in outputs for s in o["starts"]]
    errors = [e for o in outputs for e in o["errors"]]
    p99 = _percentile(delays, 99) if delays else float("inf")
    result = {
        "conversations": args.conversations, "tokens_per_conversation": args.tokens, "interval_ms": args.interval_ms,
        "client_processes": args.clients, "database": "postgresql" if db.startswith("postgres") else "sqlite",
        "errors": len(errors), "error_samples": errors[:5], "tokens_received": len(delays),
        "token_delay_ms": {"p50": _percentile(delays, 50), "p90": _percentile(delays, 90), "p99": p99,
                           "max": max(delays)} if delays else None,
        "first_token_ms": {"p50": _percentile(starts, 50), "p99": _percentile(starts, 99)} if starts else None,
        "server_cpu_s": server_cpu,
        "server_cpu_us_per_token": server_cpu * 1e6 / max(1, len(delays)),
        "server_rss_mb": {"before": rss_before, "after": rss_after},
        "idle_session_kb": {"server_memory": (rss_after - rss_before) * 1024 / args.conversations,
                            "database": db_mb * 1024 / args.conversations if db_mb is not None else None},
        "wall_s": wall, "machine": f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores",
        "pass": not errors and p99 < args.p99_limit_ms,
    }
    print(f"{args.conversations} conversations x {args.tokens} tokens every {args.interval_ms} ms "
          f"({result['database']}, {args.clients} client processes) in {wall:.1f} s")
    print(f"errors: {len(errors)}" + (f" (e.g. {errors[0]})" if errors else ""))
    if delays:
        d = result["token_delay_ms"]
        print(f"token delay (model -> client): p50 {d['p50']:.1f} ms, p90 {d['p90']:.1f} ms, p99 {d['p99']:.1f} ms, "
              f"max {d['max']:.1f} ms over {len(delays)} tokens")
        f = result["first_token_ms"]
        print(f"first token after the request: p50 {f['p50']:.0f} ms, p99 {f['p99']:.0f} ms")
    print(f"server CPU {server_cpu:.1f} s in all, {result['server_cpu_us_per_token']:.0f} µs per token delivered "
          "(turn start and end included)")
    idle = result["idle_session_kb"]
    print(f"server RSS {rss_before:.0f} MB before, {rss_after:.0f} MB after ({idle['server_memory']:.1f} KB per stored "
          f"idle session, which the server keeps nothing of but what its allocator holds on to)"
          + (f"; the database holds {idle['database']:.1f} KB per session" if idle["database"] is not None else ""))
    print("PASS" if result["pass"] else f"FAIL (needs zero errors and p99 < {args.p99_limit_ms} ms)")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0 if result["pass"] else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--conversations", type=int, default=200)
    p.add_argument("--tokens", type=int, default=100)
    p.add_argument("--interval-ms", type=float, default=20)
    p.add_argument("--clients", type=int, default=2, help="client processes sharing the conversations")
    p.add_argument("--db", help="SQLite path or postgresql:// URL (default: a temporary SQLite file)")
    p.add_argument("--p99-limit-ms", type=float, default=50)
    p.add_argument("--json", help="also write the figures to this file")
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    p.add_argument("--token", help=argparse.SUPPRESS)
    p.add_argument("--agent", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve:
        serve(args)
        return 0
    if args.client:
        client(args)
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
