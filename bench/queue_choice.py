"""Which maintained job engine should run a conversation turn as a durable job: measured on this machine.

`python -m bench.queue_choice [--engines procrastinate,arq] [--no-pypi]` runs, for each installed engine
(procrastinate, pgqueuer on asyncpg, saq on Redis and on PostgreSQL, arq; pgqueuer on psycopg with
`--engines pgqueuer-psycopg`), its own worker in separate processes
(`python -m bench.queue_choice --worker NAME`) and prints one table, engine x figure:

- pickup: one worker; a no-op job deferred, time from the defer call to the body's first line
  (p50/p99 over sequential jobs after 5 warm-up ones): "idle", PICKUPS jobs each deferred 50 ms after the
  previous one started; "back-to-back", PICKUPS/2 jobs each deferred as soon as the previous one started
  (this finds lost wake-ups: a job that waits for the engine's polling interval);
- throughput: THROUGHPUT_JOBS no-op jobs deferred at once (the engine's batch call where it has one),
  bodies started per second from the first to the last, with 1 and then 2 worker processes of
  CONCURRENCY each (in brackets: counted from the defer call, enqueueing included);
- takeover: a body sleeping 60 s; its worker process SIGKILLed; time until the body starts again in the
  other, already running worker (each engine's stalled-job mechanism as tight as it goes: ENGINE.settings);
- abort: the parent asks the engine to abort a running body awaiting asyncio.sleep(60); time until the
  body sees asyncio.CancelledError;
- per-key order: ORDERED jobs sharing one key (the engine's mechanism, if any), 2 workers, each body
  sleeping 10-50 ms: "yes" when no two overlapped and they ran in arrival order; then again with job 5
  failing on its first attempt (retried by the engine after about 1 s); with the time the 20 took;
- periodic: a per-second periodic task in both workers for PERIODIC_WINDOW s: firings and the most in one tick;
- no-op jobs run twice: pickup and throughput jobs whose body started more than once (no fault injected).

Bodies report to the parent over a Unix socket (one JSON line per event, time.monotonic(), which is one
clock for every process on Linux). Each engine gets its own PostgreSQL database (dropped at the end) or
Redis database (REDIS_DB, flushed at the end; the run refuses a database that holds anyone else's keys).
"""
from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.metadata as md
import json
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench import queue_engines
from bench.queue_engines import DEFAULT, ENGINES, TAKEOVER_BODY_S, Engine

REPO = Path(__file__).resolve().parent.parent
PICKUPS, THROUGHPUT_JOBS, ORDERED, PERIODIC_WINDOW = 200, 2000, 20, 10.0


# ---------------------------------------------------------------- parent side: events, processes, services

class Events:
    """The events the bodies sent, and waits for the ones a scenario needs."""

    def __init__(self):
        self.items: list[dict] = []
        self.waiters: list[tuple] = []

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while line := await reader.readline():
            self.add(json.loads(line))

    def add(self, ev: dict) -> None:
        self.items.append(ev)
        for waiter in list(self.waiters):
            pred, count, found, fut = waiter
            if pred(ev):
                found.append(ev)
            if len(found) >= count and not fut.done():
                fut.set_result(found)
                self.waiters.remove(waiter)

    async def wait(self, pred, count: int = 1, timeout: float = 30.0) -> list[dict]:
        found = [e for e in self.items if pred(e)]
        if len(found) >= count:
            return found
        waiter = (pred, count, found, asyncio.get_running_loop().create_future())
        self.waiters.append(waiter)
        try:
            return await asyncio.wait_for(waiter[3], timeout)
        finally:
            if waiter in self.waiters:
                self.waiters.remove(waiter)

    async def first(self, ev: str, tag: str, timeout: float = 30.0, pid_not: int | None = None) -> dict:
        found = await self.wait(lambda e: e["ev"] == ev and e["tag"] == tag and e["pid"] != pid_not, 1, timeout)
        return found[0]


class Workers:
    """The engine's worker processes: `python -m bench.queue_choice --worker NAME`, stopped by SIGKILL."""

    def __init__(self, engine: "Engine", events: Events, sock: str, tmp: Path):
        self.engine, self.events, self.sock, self.tmp, self.procs = engine, events, sock, tmp, []
        self.logdir = Path(os.environ.get("C2G_QB_LOGS", tmp))       # worker logs: kept where this says

    async def start(self) -> int:
        env = {**os.environ, "C2G_QB_MARKS": str(self.tmp / "marks"), "PYTHONPATH": str(REPO)}
        log = open(self.logdir / f"{self.engine.key}-{len(self.procs)}.log", "wb")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.queue_choice", "--worker", self.engine.key, "--socket", self.sock,
            cwd=REPO, env=env, stdout=log, stderr=log)
        self.procs.append(proc)
        await self.events.wait(lambda e: e["ev"] == "ready" and e["pid"] == proc.pid, 1, 60)
        await asyncio.sleep(1.0)             # the engine's loop starts listening after `ready`
        return proc.pid

    def kill(self, pid: int) -> None:
        os.kill(pid, signal.SIGKILL)

    async def stop(self) -> None:
        for proc in self.procs:
            if proc.returncode is None:
                proc.kill()
            await proc.wait()
        self.procs = []

    def logs(self) -> str:
        return "".join(p.read_text(errors="replace")[-1500:] for p in sorted(self.logdir.glob(f"{self.engine.key}-*.log")))


# ---------------------------------------------------------------- the scenarios

async def pickup(engine: Engine, events: Events, label: str, gap: float, count: int) -> str:
    """Sequential no-op jobs, each deferred `gap` seconds after the previous body started (0: at once)."""
    for i in range(5):
        await engine.defer("noop", f"warm{label}-{i}")
        await events.first("start", f"warm{label}-{i}")
    latencies = []
    for i in range(count):
        await asyncio.sleep(gap)
        began = time.monotonic()
        await engine.defer("noop", f"{label}-{i}")
        latencies.append((await events.first("start", f"{label}-{i}"))["t"] - began)
    cuts = statistics.quantiles(latencies, n=100)
    slow = sum(latency > 0.1 for latency in latencies)
    return f"{cuts[49] * 1000:.1f} / {cuts[98] * 1000:.1f} ms; {slow}/{count} > 0.1 s (max {max(latencies):.2f} s)"


async def throughput(engine: Engine, events: Events, label: str) -> str:
    tags = [f"{label}-{i}" for i in range(THROUGHPUT_JOBS)]
    seen: set[str] = set()

    def new_job(e: dict) -> bool:          # a job that runs twice counts once (run_twice reports it)
        fresh = e["ev"] == "start" and e["tag"].startswith(label + "-") and e["tag"] not in seen
        seen.add(e["tag"]) if fresh else None
        return fresh
    began = time.monotonic()
    await engine.defer_many("noop", tags)
    times = sorted(e["t"] for e in await events.wait(new_job, len(tags), 180))
    return f"{(len(times) - 1) / (times[-1] - times[0]):.0f}/s ({len(times) / (times[-1] - began):.0f}/s)"


def run_twice(events: Events) -> str:
    """No-op jobs (pickup, throughput) whose body started more than once, with no fault injected."""
    starts: dict[str, int] = {}
    for e in events.items:
        if e["ev"] == "start" and e["tag"].startswith(("warm", "pick-", "b2b-", "tp1-", "tp2-")):
            starts[e["tag"]] = starts.get(e["tag"], 0) + 1
    return f"{sum(n > 1 for n in starts.values())} of {len(starts)}"


async def periodic(engine: Engine, events: Events) -> str:
    """Firings of the per-second task over PERIODIC_WINDOW whole seconds, each counted at the second it was
    scheduled for (procrastinate passes it; elsewhere the second its body started)."""
    first = int(time.time()) + 1
    seconds = range(first, first + int(PERIODIC_WINDOW))
    await asyncio.sleep(seconds[-1] + 2.5 - time.time())
    fired: dict[int, int] = {}
    for e in events.items:
        second = (int(e["tag"]) if e["tag"] else int(e["wall"])) if e["ev"] == "tick" else None
        if second in seconds:
            fired[second] = fired.get(second, 0) + 1
    return (f"{sum(fired.values())} for {len(seconds)} ticks, max {max(fired.values(), default=0)}/tick, "
            f"{len(seconds) - len(fired)} missed")


def order_verdict(evs: list[dict], tags: list[str]) -> str:
    """'yes' when no two bodies overlapped and they finished in arrival order."""
    running = peak = 0
    for e in sorted(evs, key=lambda e: e["t"]):
        running += 1 if e["ev"] == "start" else -1
        peak = max(peak, running)
    ended = [e["tag"] for e in sorted(evs, key=lambda e: e["t"]) if e["ev"] == "end"]
    in_order = ended == tags
    if peak == 1 and in_order:
        return "yes"
    return f"no ({peak} at once{'' if in_order else ', out of order'})"


async def ordering(engine: Engine, events: Events, variant: str, fail_fifth: bool) -> str:
    tags = [f"ord{variant}-{i:02d}" for i in range(ORDERED)]
    for i, tag in enumerate(tags):
        await engine.defer("ordered", tag, 1.0 if fail_fifth and i == 5 else 0.0, key="conversation-1")
    mine = set(tags)
    try:
        await events.wait(lambda e: e["ev"] == "end" and e["tag"] in mine, ORDERED, 30)
    except TimeoutError:
        pass
    await asyncio.sleep(0.3)
    evs = [e for e in events.items if e["ev"] in ("start", "end", "fail") and e["tag"] in mine]
    done, failed = sum(e["ev"] == "end" for e in evs), sum(e["ev"] == "fail" for e in evs)
    span = max(e["t"] for e in evs) - min(e["t"] for e in evs)
    verdict = order_verdict(evs, tags) + f", {ORDERED} jobs in {span:.1f} s" + (
        f", {failed} failed attempt retried" if failed and done == ORDERED else "")
    return verdict if done == ORDERED else f"{verdict}; {done}/{ORDERED} ran, {failed} failed"


async def abort(engine: Engine, events: Events, samples: int = 5) -> str:
    """Median and max over `samples` aborts, each of a body 0.5 s into its asyncio.sleep(60)."""
    latencies = []
    for i in range(samples):
        handle = await engine.defer("sleep", f"abort-{i}", TAKEOVER_BODY_S)
        await events.first("start", f"abort-{i}")
        await asyncio.sleep(0.5)
        began = time.monotonic()
        await engine.abort(handle)
        try:
            latencies.append((await events.first("cancelled", f"abort-{i}", timeout=15))["t"] - began)
        except TimeoutError:
            return f"not cancelled in 15 s ({i} of {samples} were)"
    await asyncio.sleep(3)                   # an aborted job must not run again
    again = sum(e["ev"] == "start" and e["tag"].startswith("abort-") for e in events.items) - samples
    return (f"{statistics.median(latencies):.2f} s (max {max(latencies):.2f})"
            + (f"; {again} ran again" if again else ""))


async def takeover(engine: Engine, events: Events, workers: Workers) -> str:
    await engine.defer("sleep", "take", TAKEOVER_BODY_S)
    victim = (await events.first("start", "take"))["pid"]
    await asyncio.sleep(0.5)
    killed = time.monotonic()
    workers.kill(victim)
    try:
        again = await events.first("start", "take", timeout=TAKEOVER_BODY_S + 60, pid_not=victim)
    except TimeoutError:
        return f"none in {TAKEOVER_BODY_S + 60:.0f} s"
    return f"{again['t'] - killed:.1f} s"


async def attempt(results: dict, figure: str, coro) -> None:
    began = time.monotonic()
    try:
        results[figure] = await coro
    except Exception as error:          # one figure failing leaves the others
        results[figure] = f"error: {type(error).__name__}: {str(error)[:60]}"
    print(f"  {figure}: {results[figure]} [{time.monotonic() - began:.0f} s]", file=sys.stderr, flush=True)


async def measure(engine: Engine, events: Events, sock: str, tmp: Path) -> dict:
    results: dict[str, str] = {}
    events.items.clear()                    # tags repeat from engine to engine, and so do the
    shutil.rmtree(tmp / "marks", ignore_errors=True)     # first-attempt markers of the ordered jobs
    (tmp / "marks").mkdir()
    await engine.open()
    workers = Workers(engine, events, sock, tmp)
    try:
        await workers.start()
        await attempt(results, "pickup p50 / p99, idle", pickup(engine, events, "pick", 0.05, PICKUPS))
        await attempt(results, "pickup, back-to-back", pickup(engine, events, "b2b", 0.0, PICKUPS // 2))
        await attempt(results, "throughput, 1 process", throughput(engine, events, "tp1"))
        await workers.start()
        await attempt(results, "throughput, 2 processes", throughput(engine, events, "tp2"))
        await attempt(results, "periodic, 2 processes", periodic(engine, events))
        await attempt(results, "per-key order", ordering(engine, events, "a", False))
        if engine.order_mechanism.startswith(("none",)):
            results["per-key order, a retry"] = "n/a"
        else:
            await attempt(results, "per-key order, a retry", ordering(engine, events, "b", True))
        await attempt(results, "abort running async job", abort(engine, events))
        await attempt(results, "takeover after SIGKILL", takeover(engine, events, workers))
        results["no-op jobs run twice"] = run_twice(events)
        if any(v.startswith("error") for v in results.values()):
            print(f"--- {engine.key} worker logs (tail)\n{workers.logs()}", file=sys.stderr)
    finally:
        await workers.stop()
        await engine.close()
    return results


# ---------------------------------------------------------------- what the package itself says

def package_facts(engine: Engine, pypi: bool) -> dict:
    version = md.version(engine.dist)
    requires = [r for r in md.requires(engine.dist) or [] if "extra ==" not in r]
    deps = ", ".join(sorted({re.split(r"[\s;<>=!~\[(]", r, maxsplit=1)[0].lower() for r in requires})) or "-"
    memory = "no"
    if engine.inmemory:
        module = importlib.import_module(engine.inmemory[0])
        memory = ".".join(engine.inmemory) if hasattr(module, engine.inmemory[1]) else "no"
    return {"version": version, "released (PyPI upload)": released(engine.dist, version) if pypi else "not looked up",
            "depends on": deps, "in-memory backend": memory, "per-key mechanism": engine.order_mechanism}


def released(dist: str, version: str) -> str:
    """The upload date of the installed version and the newest version, from PyPI's JSON simple index (pip's)."""
    import httpx
    from packaging.version import Version
    try:
        index = httpx.get(f"https://pypi.org/simple/{dist}/", timeout=10,
                          headers={"Accept": "application/vnd.pypi.simple.v1+json"}).json()
    except Exception as error:
        return f"unknown ({type(error).__name__})"
    dates = [f["upload-time"][:10] for f in index["files"] if f["filename"].startswith(f"{dist}-{version}")
             and f.get("upload-time")]
    newest = max((v for v in index.get("versions", []) if not Version(v).is_prerelease), key=Version, default="?")
    return f"{min(dates) if dates else '?'} (newest {newest})"


# ---------------------------------------------------------------- the run

def table(columns: dict[str, dict]) -> str:
    from tabulate import tabulate
    figures = list(dict.fromkeys(f for c in columns.values() for f in c))
    rows = [[f, *(columns[e].get(f, "") for e in columns)] for f in figures]
    return tabulate(rows, headers=["", *columns], tablefmt="github", maxcolwidths=[None] + [24] * len(columns))


async def run(selected: list[Engine], pypi: bool) -> None:
    events = Events()
    with tempfile.TemporaryDirectory(prefix="c2g-queues-") as tmp:
        sock = f"{tmp}/events.sock"
        server = await asyncio.start_unix_server(events.serve, path=sock)
        columns: dict[str, dict] = {}
        for engine in selected:
            if not engine.installed():
                print(f"skipping {engine.title}: {' or '.join(engine.modules())} is not installed", file=sys.stderr)
                continue
            began = time.monotonic()
            print(f"measuring {engine.title} ...", file=sys.stderr, flush=True)
            columns[engine.title] = {**package_facts(engine, pypi), **await measure(engine, events, sock, Path(tmp))}
            print(f"  done in {time.monotonic() - began:.0f} s", file=sys.stderr, flush=True)
        server.close()
    print(table(columns))
    print("\nSettings behind the figures:")
    for engine in selected:
        if engine.title in columns:
            print(f"- {engine.title}: {engine.settings}")


def worker_main(key: str, sock: str) -> None:
    import logging
    logging.basicConfig(level=os.environ.get("C2G_QB_LOGLEVEL", "WARNING"), stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    queue_engines.connect_reporter(sock)
    asyncio.run(next(e for e in ENGINES if e.key == key).run_worker())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", default=",".join(DEFAULT), help="comma-separated: "
                        + ", ".join(e.key for e in ENGINES))
    parser.add_argument("--no-pypi", action="store_true", help="do not look release dates up on PyPI")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--socket", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker_main(args.worker, args.socket)
        return
    wanted = args.engines.split(",")
    asyncio.run(run([e for e in ENGINES if e.key in wanted], pypi=not args.no_pypi))


if __name__ == "__main__":
    main()
