"""bench.scale's fault runs (a takeover after a SIGKILL, random worker kills, every answer checked) and its
report; `python -m bench.scale` runs them (see bench/scale.py for what is measured)."""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import shutil
import signal
import tempfile
import time
import uuid
from pathlib import Path

from bench.scale_floor import floor, print_floor
from bench.scale import (
    CHAT,
    SLOW,
    STAMP,
    Cluster,
    _json_post,
    create_agent,
    gather,
    load_run,
    print_load_errors,
    print_load_header,
    print_load_row,
    run_clients,
)
from bench.server_load import _post_stream


def _session_log(cluster: Cluster, agent: str, sid: str) -> list[tuple[str, str]]:
    import httpx
    reply = httpx.get(f"{cluster.apis[-1].url}/api/v1/agents/{agent}/sessions/{sid}",
                      headers={"Authorization": f"Bearer {cluster.token}"}, timeout=60).json()
    return [(m["role"], m["content"]) for m in reply["data"]["messages"] if m.get("id")]


def _owner_pid(cluster: Cluster, sid: str) -> int | None:
    row = cluster.query("SELECT owner FROM c2g_turns WHERE session_id = %s AND status = 'running'", (sid,))
    return int(row[0].rsplit(":", 2)[1]) if row and row[0] else None


async def _takeover(cluster: Cluster, agent: str) -> dict:
    api = cluster.apis[0]
    sid = (await _json_post(api.url, cluster.token, f"/api/v1/agents/{agent}/sessions", {}))["id"]
    query = f"{SLOW}-{uuid.uuid4().hex[:8]}"
    host, port = api.url.split("//", 1)[1].rsplit(":", 1)
    status, body = await _post_stream(host, int(port), CHAT, cluster.token,
                                      {"agent_id": agent, "session_id": sid, "query": query, "stream": True})
    result: dict = {"query": query, "errors": []}
    if status != 200:
        return {**result, "errors": [f"HTTP {status}"]}
    killed_ns, tokens, buffer, events = None, 0, b"", []
    async for arrived, data in body:
        buffer += data
        *frames, buffer = buffer.split(b"\n\n")
        for frame in frames:
            if frame == b"data:[DONE]":
                result["done_s"] = (arrived - killed_ns) / 1e9 if killed_ns else None
                continue
            event = json.loads(frame[5:])
            events.append(event.get("event"))
            if event.get("event") == "message":
                for called, stamp in STAMP.findall(event["data"].get("content") or ""):
                    if called:
                        continue
                    tokens += 1
                    if killed_ns is not None and int(stamp) > killed_ns and "first_token_s" not in result:
                        result["first_token_s"] = (arrived - killed_ns) / 1e9
            elif event.get("event") == "workflow_finished" and killed_ns:
                result["finished_s"] = (arrived - killed_ns) / 1e9
        if killed_ns is None and tokens >= 3:
            pid = await asyncio.to_thread(_owner_pid, cluster, sid)
            victim = next((w for w in cluster.workers if w.pid == pid), None)
            if victim is None:
                return {**result, "errors": [f"no worker of this run runs the turn (owner pid {pid})"]}
            alive = [w for w in cluster.workers if w is not victim and w.proc.poll() is None]
            if not alive:
                return {**result, "errors": ["no second worker alive"]}
            victim.proc.send_signal(signal.SIGKILL)
            killed_ns = time.time_ns()
            victim.proc.wait()
            result["tokens_before_kill"] = tokens
    if events[-1:] != ["workflow_finished"]:
        result["errors"].append(f"the stream ended with {events[-1:]}, not workflow_finished")
    if "first_token_s" not in result:
        result["errors"].append("no token of the new worker reached the client")
    log = await asyncio.to_thread(_session_log, cluster, agent, sid)
    if [r for r, _c in log] != ["user", "assistant"] or log[0][1] != query or not log[1][1].startswith(f"{query}=>"):
        result["errors"].append(f"the session logs {[(r, c[:40]) for r, c in log]}")
    return result


def takeover_runs(cluster: Cluster, agent: str, runs: int) -> list[dict]:
    results = []
    for _ in range(runs):
        result = asyncio.run(_takeover(cluster, agent))
        results.append(result)
        # a supervisor restarts the killed worker
        dead = [w for w in cluster.workers if w.proc.poll() is not None]
        for w in dead:
            cluster.workers.remove(w)
        concurrency, pool = cluster.worker_options(len(cluster.workers) + len(dead))
        cluster.start_workers(len(dead), concurrency, pool)
        print(f"takeover: first token of the new worker {result.get('first_token_s', float('nan')):.1f} s after the "
              f"kill, workflow_finished {result.get('finished_s', float('nan')):.1f} s"
              + (f"; ERRORS {result['errors']}" if result["errors"] else ""), flush=True)
    return results


# --- kills -----------------------------------------------------------------------------------------------
def _open_turns_of(cluster: Cluster, pid: int) -> int:
    return cluster.query("SELECT count(*) FROM c2g_turns WHERE status IN ('queued', 'running') AND owner LIKE %s",
                         (f"%:{pid}:%",))[0]


def kill_run(cluster: Cluster, agent: str) -> dict:
    args = cluster.args
    stop = cluster.tmp / f"stop-{uuid.uuid4().hex[:6]}"
    start_at = time.time() + 3
    think = 200.0
    procs = run_clients(cluster, agent, args.kill_conversations, start_at=start_at, ramp=args.model_ms / 1000,
                        deadline=None, think_ms=think, tag="kills", stop_file=stop)
    time.sleep(max(0.0, start_at - time.time()) + args.model_ms / 1000 + 2)
    kills = []
    for _ in range(args.kills):
        # a random moment once the turns the last kill hit have had time to end: workers that die independently
        # seldom hit one turn twice (a turn whose workers die three times is failed by design: a turn that
        # kills its worker, out of memory say, must not kill them all)
        time.sleep(random.uniform(1.0, 4.0) + args.model_ms / 1000)
        live = [w for w in cluster.workers if w.proc.poll() is None]
        victim = random.choice(live)
        held = _open_turns_of(cluster, victim.pid)
        victim.proc.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        victim.proc.wait()
        cluster.workers.remove(victim)
        concurrency, pool = cluster.worker_options(len(cluster.workers) + 1)
        cluster.start_workers(1, concurrency, pool)        # a supervisor starts it again
        while _open_turns_of(cluster, victim.pid) and time.monotonic() - killed < 120:
            time.sleep(0.2)
        left = _open_turns_of(cluster, victim.pid)
        kills.append({"turns_held": held, "taken_up_s": time.monotonic() - killed, "left": left})
        print(f"kill {len(kills)}: a worker running {held} turn(s); taken up by others in "
              f"{kills[-1]['taken_up_s']:.1f} s" + (f", {left} still on the dead worker" if left else ""), flush=True)
    stop.touch()
    out = gather(procs, timeout=300)
    return {"kills": kills, **verify(cluster, agent, out)}


def verify(cluster: Cluster, agent: str, out: dict) -> dict:
    """Every question a client asked is in its session's log once, answered once, as itself."""
    asked: dict[int, list[str]] = {}
    for t in sorted(out["turns"], key=lambda t: t["sent"]):
        asked.setdefault(t["conversation"], []).append(t["query"])
    lost, duplicated, problems = 0, 0, list(out["errors"])
    for i, sid in out["sessions"].items():
        queries = asked.get(i, [])
        log = _session_log(cluster, agent, sid)
        users = [c for r, c in log if r == "user"]
        answers = [c for r, c in log if r == "assistant"]
        for q in queries:
            n_user, n_answer = users.count(q), sum(1 for a in answers if a.startswith(f"{q}=>"))
            if n_user == 0 or n_answer == 0:
                lost += 1
                problems.append(f"{q}: logged {n_user} time(s), answered {n_answer} time(s)")
            elif n_user > 1 or n_answer > 1:
                duplicated += 1
                problems.append(f"{q}: logged {n_user} time(s), answered {n_answer} time(s)")
        if users != [q for q in queries if q in users]:
            problems.append(f"session {sid}: questions logged out of order")
        # an empty answer is a lost turn's (counted above); another answer to no question is one answered twice
        strangers = [a for a in answers if a and not any(a.startswith(f"{q}=>") for q in queries)]
        if strangers:
            duplicated += len(strangers)
            problems.append(f"session {sid}: answers to no question asked: {strangers[:2]}")
        if "" in answers:
            problems.append(f"session {sid}: {answers.count('')} empty answer(s)")
    stream_errors = [f"{t['query']}: {t['error']}" for t in out["turns"] if t["error"]]
    return {"turns": len(out["turns"]), "lost": lost, "duplicated": duplicated, "stream_errors": len(stream_errors),
            "problems": (problems + stream_errors)[:30]}


# --- the driver -------------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> int:
    import canvas2graph.server
    # SIGTERM stops the run as Ctrl-C does: its processes and its database go with it
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    tmp = Path(tempfile.mkdtemp(prefix="c2g-scale-"))
    started = time.monotonic()
    print(f"bench.scale: {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.2f} at the start; code: {Path(canvas2graph.server.__file__).parent.parent}")
    print(f"model: {args.tokens} tokens over {args.model_ms:.0f} ms; think {args.think_ms:.0f} ms (0.5x-1.5x) between "
          f"a conversation's turns; {args.seconds:.0f} s measured per run; {args.clients} client processes", flush=True)
    cluster = Cluster(args, tmp)
    limit, used = cluster.connections_free()
    need = 2 * (args.api_pool_size + 1) + max(args.workers) * (max(8, args.worker_pool_total // max(args.workers)) + 2)
    print(f"PostgreSQL: {used} of {limit} connections in use; this run takes up to {need} more"
          + (" - NOT ENOUGH: lower --worker-pool-total or --api-pool-size" if used + need > limit else ""), flush=True)
    result: dict = {"machine": f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores",
                    "model_ms": args.model_ms, "tokens": args.tokens, "think_ms": args.think_ms, "seconds": args.seconds,
                    "load_runs": []}
    try:
        cluster.start_apis(2)
        agent = create_agent(cluster)
        print_load_header()
        try:
            for w in args.workers:
                concurrency, pool = cluster.worker_options(w)
                cluster.start_workers(w - len(cluster.workers), concurrency, pool)
                for k in args.conversations:
                    row = load_run(cluster, agent, k)
                    result["load_runs"].append(row)
                    print_load_row(row)
                    print_load_errors(row)
        except Exception as e:      # noqa: BLE001 - the other parts are measured all the same
            result["load_failure"] = _failure("the load runs", e)
        try:
            found = floor(cluster.server, args.tokens)
            result["handwritten_floor"] = found
            busiest = max(result["load_runs"], key=lambda r: r["turns_per_s"], default=None)
            print_floor(found, busiest, (args.model_ms + args.think_ms) / 1000, os.cpu_count() or 1)
        except Exception as e:      # noqa: BLE001
            _failure("the hand-written floor", e)
        try:
            if len([w for w in cluster.workers if w.proc.poll() is None]) < 2:
                cluster.workers = [w for w in cluster.workers if w.proc.poll() is None]
                concurrency, pool = cluster.worker_options(2)
                cluster.start_workers(2 - len(cluster.workers), concurrency, pool)
            print(f"takeover: {args.takeovers} time(s), {len(cluster.workers)} workers", flush=True)
            result["takeovers"] = takeover_runs(cluster, agent, args.takeovers)
            print(f"kills: {args.kills} random worker SIGKILLs under {args.kill_conversations} conversations", flush=True)
            result["kill_run"] = kill_run(cluster, agent)
        except Exception as e:      # noqa: BLE001
            result["failure"] = _failure("the takeover and kills", e)
    finally:
        cluster.close()
        if args.keep:
            print(f"logs kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return report(args, result, time.monotonic() - started)


def _failure(what: str, e: BaseException) -> str:
    text = f"{what} stopped: {type(e).__name__}: {e}"
    print(text, flush=True)
    return text


def report(args: argparse.Namespace, result: dict, wall: float) -> int:
    runs = result["load_runs"]
    largest = max(args.conversations)
    at_largest = [r for r in runs if r["conversations"] == largest and r["added_ms"]]
    best = min(at_largest, key=lambda r: r["added_ms"]["p99"], default=None)
    errors = sum(r["errors"] for r in runs) + ("load_failure" in result)
    takeovers = result.get("takeovers") or []
    first = [t.get("first_token_s", float("inf")) for t in takeovers]
    takeover_errors = [e for t in takeovers for e in t["errors"]] + ([result["failure"]] if "failure" in result else [])
    kills = result.get("kill_run") or {"lost": -1, "duplicated": -1, "stream_errors": -1, "turns": 0,
                                       "problems": [result.get("failure", "not run")]}
    # name: (met, measured, goal)
    checks = {
        f"{largest} conversations, p99 latency a turn adds beyond its model":
            (best is not None and best["added_ms"]["p99"] <= args.p99_limit_ms and best["errors"] == 0,
             f"{best['added_ms']['p99']:.0f} ms with {best['workers']} worker(s), the best" if best else "not measured",
             f"<= {args.p99_limit_ms:.0f} ms"),
        "errors in the load runs": (errors == 0, str(errors), "0"),
        "takeover after SIGKILL (kill -> first token of the new worker)":
            (bool(first) and max(first) <= args.takeover_limit_s and not takeover_errors,
             f"{', '.join(f'{s:.1f}' for s in first)} s" + (f"; {takeover_errors[:2]}" if takeover_errors else ""),
             f"<= {args.takeover_limit_s:.0f} s"),
        f"lost turns over {args.kills} worker kills":
            (kills["lost"] == 0 and kills["stream_errors"] == 0,
             f"{kills['lost']} lost, {kills['stream_errors']} broken streams of {kills['turns']} turns", "0"),
        f"duplicated turns over {args.kills} worker kills": (kills["duplicated"] == 0, str(kills["duplicated"]), "0"),
    }
    if kills["problems"]:
        print("kill run problems:", *kills["problems"], sep="\n  ")
    print(f"\n## Targets ({wall:.0f} s; load average {os.getloadavg()[0]:.2f} at the end)\n")
    print("| target | measured | goal | |\n|---|---|---|---|")
    for name, (met, measured, goal) in checks.items():
        print(f"| {name} | {measured} | {goal} | {'met' if met else 'NOT MET'} |")
    passed = all(met for met, _m, _g in checks.values())
    print("PASS" if passed else "FAIL")
    result["targets"] = {name: {"met": met, "measured": measured, "goal": goal}
                         for name, (met, measured, goal) in checks.items()}
    result["pass"] = passed
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0 if passed else 1
