"""What a session costs to keep: bytes stored per conversation, on SQLite and PostgreSQL, beside RAGFlow.

    python -m bench.storage                   # the full run (1,000 turns, 10,000 items): about 2.5 min on 2 cores
    python -m bench.storage --quick           # 100 turns, 1,000 items: a smoke run (targets at 1,000 not judged)
    python -m bench.storage --json out.json   # also write every figure
    python -m bench.storage --stores sqlite   # leave PostgreSQL out (it is $CANVAS2GRAPH_BENCH_PG)
    python -m bench.storage --items 100,1000  # the `iteration` case over these item counts only

Two cases of `../shared/parity/cases`, driven through `Runner.run_turn` as the server drives them, each on a
fresh SQLite file and on PostgreSQL under a fresh session id:
- `linear` (Begin -> LLM -> Message): one conversation of 200-character questions, scripted answers of
  about 120 characters; the session's bytes after 10, 100 and 1,000 turns, and the time of turns 10 and 1,000
  (the median of the 15 turns around each, in a process warmed up by another conversation, `warm_up`; on
  PostgreSQL each of them starts when no autovacuum runs, `autovacuum_done`);
- `iteration` (split -> Iteration over an LLM -> Message): the bytes of one turn over 100, 1,000 and 10,000 items.

Bytes stored: on SQLite the file's pages in use (`page_count - freelist_count`, after a WAL checkpoint); on
PostgreSQL the stored size (`pg_column_size`, compressed as stored) of the session's rows in LangGraph's
tables (checkpoints, blobs, writes), canvas2graph's turn log and its compacted turns' traces (runtime/run/retention.py). RAGFlow stores one string per conversation,
`str(canvas)` (the oracle's `--state-out`), rewritten every turn: its length is RAGFlow's figure, measured by
`bench/storage_oracle.py` in the oracle's own Python.

Targets (issue 21): a 1,000-turn conversation <= 5 MB and <= 3x RAGFlow's on both stores; 10,000 items
<= 50 MB and growing linearly (bytes per item at 10,000 within 1.5x of those at 1,000); turn 1,000 within
1.2x of turn 10.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

if __package__ in (None, ""):          # `python bench/storage.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

REPO = Path(__file__).resolve().parent.parent
CASES = Path(os.environ.get("CANVAS2GRAPH_PARITY_CASES", REPO.parent / "shared" / "parity" / "cases"))
ORACLE_HOME = Path(os.environ.get("ORACLE_HOME", Path.home() / ".cache" / "ragflow-oracle"))
PG_URL = os.environ.get("CANVAS2GRAPH_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
QUESTION = ("Question %d: " + "please tell me about the opening hours, the return policy and the delivery "
            "options of your shop, and whether I can pay by card or by bank transfer for a large order at once?")[:200]
ANSWER = ("We are open from nine to six on weekdays; returns are accepted within thirty days, and both card "
          "and transfer work.")
MB = 1_000_000
PG_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
WARM_UP = 20             # turns of another conversation before the timed one (`warm_up`)
AROUND = 7               # a timed turn's figure is the median of it and the 7 turns either side


def question(turn: int) -> str:
    return (QUESTION % turn)[:200]


# --- bytes a session holds -------------------------------------------------------------------------
def sqlite_bytes(path: str) -> int:
    """The pages in use of a SQLite file (after folding the WAL in): what the store keeps on disk."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        used = conn.execute("PRAGMA page_count").fetchone()[0] - conn.execute("PRAGMA freelist_count").fetchone()[0]
    return used * page


async def postgres_bytes(url: str, session: str) -> int:
    """The stored size of a session's rows in every table that keeps part of it."""
    import psycopg
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        total = 0
        tables = [t for (t,) in await (await conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")).fetchall()]
        # the server's record of each turn (c2g_turns) is keyed by session id, LangGraph's tables by thread id
        keyed = {**{t: "thread_id" for t in PG_TABLES + ("c2g_compacted_turns",)}, "c2g_turns": "session_id"}
        for table, key in [(t, k) for t, k in keyed.items() if t in tables]:
            row = await (await conn.execute(f"SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM {table} t "
                                            f"WHERE {key} = %s", (session,))).fetchone()
            total += int(row[0])
        return total


async def autovacuum_done(url: str, limit: float = 30.0) -> None:
    """Wait (up to `limit` seconds) until no autovacuum worker runs on the database. Retention deletes a session's
    older steps every 20 turns, and PostgreSQL's autovacuum then cleans the tables beside the next turns: on
    2 cores, the turns it overlaps took 1.5x their time (17-25 ms against 12 at turn 1,000). That is the
    database's upkeep, not what a turn does, so a timed turn waits for it to finish."""
    import psycopg
    deadline = time.monotonic() + limit
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = await (await conn.execute("SELECT count(*) FROM pg_stat_activity "
                                            "WHERE backend_type = 'autovacuum worker'")).fetchone()
            if not row[0]:
                return
            await asyncio.sleep(0.05)


async def session_bytes(url: str, session: str) -> int:
    return await postgres_bytes(url, session) if url.startswith("postgresql://") else sqlite_bytes(url)


# --- the two cases ---------------------------------------------------------------------------------
def _dsl(case: str) -> dict:
    return json.loads((CASES / case / "dsl.json").read_text())


async def _turn(runner, session: str, query: str) -> float:
    from canvas2graph.runtime.run.runner import TurnRequest
    start = time.perf_counter()
    async for _ in runner.run_turn(session, TurnRequest(query=query)):
        pass
    if runner.outcome.status != "finished":
        raise RuntimeError(f"turn {query[:20]!r} ended {runner.outcome.status}: {runner.outcome.error}")
    return time.perf_counter() - start


def _runner(dsl: dict, saver, reply: str):
    from canvas2graph.compiler.canvas import compile_dsl
    from canvas2graph.runtime.services.models import ModelFactory
    from canvas2graph.runtime.services.scripted import Script
    from canvas2graph.runtime.run.runner import Runner
    script = Script.load({"auto_reply": reply})
    return Runner(compile_dsl(dsl), saver, ModelFactory(script=script), script)


async def warm_up(url: str) -> None:
    """`WARM_UP` turns of another conversation, deleted after: the process's first turns pay for what a running
    server has paid once (imports, caches, first connections), 30% more at turns 6 to 9 than at 10 to 14, which
    would count against turn 10 and hide a growth at turn 1,000."""
    from canvas2graph.runtime.run.checkpoint import open_checkpointer
    session = f"bench-warm-{uuid.uuid4()}"
    async with open_checkpointer(url) as saver:
        runner = _runner(_dsl("linear"), saver, ANSWER)
        for turn in range(1, WARM_UP + 1):
            await _turn(runner, session, question(turn))
        await saver.adelete_thread(session)


async def linear(url: str, turns: list[int], timed: list[int], warm_url: str) -> dict[str, Any]:
    """One conversation of the `linear` case: bytes after each of `turns`, median time of the `AROUND` turns
    either side of each of `timed` (after `warm_up` on `warm_url`)."""
    from canvas2graph.runtime.run.checkpoint import open_checkpointer
    await warm_up(warm_url)
    session, sizes, times = f"bench-{uuid.uuid4()}", {}, {}
    last = max(turns + [t + AROUND for t in timed])
    async with open_checkpointer(url) as saver:
        runner = _runner(_dsl("linear"), saver, ANSWER)
        window = {k for t in timed for k in range(t - AROUND, t + AROUND + 1)}
        for turn in range(1, last + 1):
            if turn in window and url.startswith("postgresql://"):
                await autovacuum_done(url)
            times[turn] = await _turn(runner, session, question(turn))
            if turn in turns:
                sizes[turn] = await session_bytes(url, session)
        await saver.adelete_thread(session)       # PostgreSQL is shared: leave nothing behind
    around = {t: statistics.median(times[k] for k in range(t - AROUND, t + AROUND + 1) if k in times) for t in timed}
    return {"bytes": sizes, "turn_ms": {t: round(v * 1000, 2) for t, v in around.items()}}


async def iteration(url_of, items: list[int]) -> dict[int, int]:
    """The bytes of one `iteration` turn over each number of `items`, each on a fresh store."""
    from canvas2graph.runtime.run.checkpoint import open_checkpointer
    out = {}
    for n in items:
        url, session = url_of(f"iteration-{n}"), f"bench-{uuid.uuid4()}"
        async with open_checkpointer(url) as saver:
            runner = _runner(_dsl("iteration"), saver, "Three words here.")
            await _turn(runner, session, ",".join(f"item{i}" for i in range(n)))
            out[n] = await session_bytes(url, session)
            await saver.adelete_thread(session)
    return out


def ragflow(turns: list[int], items: list[int]) -> dict | None:
    """RAGFlow's stored conversation for the same turns and items, or None when the oracle is not set up."""
    python = ORACLE_HOME / "venv" / "bin" / "python"
    harness = REPO.parent / "shared" / "oracle" / "harness"
    if not python.exists() or not harness.is_dir():
        print(f"RAGFlow's engine is not set up ({python}); its column stays empty", file=sys.stderr)
        return None
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "spec.json"
        spec.write_text(json.dumps({"harness": str(harness), "linear_dsl": str(CASES / "linear" / "dsl.json"),
                                    "iteration_dsl": str(CASES / "iteration" / "dsl.json"), "turns": turns,
                                    "items": items, "question": QUESTION, "answer": ANSWER}))
        done = subprocess.run([str(python), str(REPO / "bench" / "storage_oracle.py"), str(spec)], cwd=str(harness),
                              capture_output=True, text=True, env={**os.environ, "ORACLE_HOME": str(ORACLE_HOME)})
    if done.returncode != 0:
        print(f"RAGFlow's engine failed: {done.stderr[-2000:]}", file=sys.stderr)
        return None
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {kind: {int(k): v for k, v in values.items()} for kind, values in result.items()}


def from_json(data: dict) -> dict:
    """A result read back from `--json` (JSON object keys are strings; the sizes are numbers)."""
    def ints(d: dict | None) -> dict | None:
        return None if d is None else {int(k): v for k, v in d.items()}
    stores = {name: {"linear": {"bytes": ints(st["linear"]["bytes"]), "turn_ms": ints(st["linear"]["turn_ms"])},
                     "iteration": ints(st["iteration"])} for name, st in data["stores"].items()}
    ragflow_ = data.get("ragflow")
    return {"stores": stores, "ragflow": None if ragflow_ is None else {k: ints(v) for k, v in ragflow_.items()}}


def quick_sizes(data: dict) -> tuple[list[int], list[int]]:
    """The turns and items a result measured."""
    first = next(iter(data["stores"].values()))
    return sorted(int(k) for k in first["linear"]["bytes"]), sorted(int(k) for k in first["iteration"])


# --- the table -------------------------------------------------------------------------------------
def _mb(n: int | None) -> str:
    return "-" if n is None else f"{n / MB:.2f} MB" if n >= 100_000 else f"{n / 1000:.1f} KB"


def rows(result: dict, turns: list[int], items: list[int], full: bool) -> list[tuple[str, str, str, bool | None]]:
    """(target, figure, goal, met) for every target; targets at sizes a quick run did not reach are not judged."""
    out: list[tuple[str, str, str, bool | None]] = []
    rf = result.get("ragflow") or {}
    for store, res in result["stores"].items():
        lin, it = res["linear"]["bytes"], res["iteration"]
        for t in turns:
            theirs = (rf.get("linear") or {}).get(t)
            ratio = f" ({lin[t] / theirs:.1f}x RAGFlow's {_mb(theirs)})" if theirs else ""
            out.append((f"{store}: `linear`, {t:,} turns", _mb(lin[t]) + ratio, "", None))
        out.append(_thousand_turns(store, lin, (rf.get("linear") or {}).get(1000)))
        for n in items:
            theirs = (rf.get("iteration") or {}).get(n)
            out.append((f"{store}: `iteration`, one turn over {n:,} items",
                        f"{_mb(it[n])}, {it[n] / n:,.0f} B/item" + (f" (RAGFlow {_mb(theirs)})" if theirs else ""), "", None))
        out.append(_ten_thousand_items(store, it))
        if 1_000 in it and 10_000 in it:
            growth = (it[10_000] / 10_000) / (it[1_000] / 1_000)
            out.append((f"{store}: `iteration` grows linearly", f"{growth:.2f}x bytes per item at 10,000 against 1,000",
                        "<= 1.5x", growth <= 1.5))
        ms = res["linear"]["turn_ms"]
        hi = max(ms)
        ratio = ms[hi] / ms[min(ms)]
        out.append((f"{store}: time of turn {hi:,} against turn {min(ms)}",
                    f"{ms[hi]:.1f} / {ms[min(ms)]:.1f} ms = {ratio:.2f}x", "<= 1.2x" if full else "",
                    (ratio <= 1.2) if full else None))
    return out


def _thousand_turns(store: str, lin: dict[int, int], theirs: int | None) -> tuple[str, str, str, bool | None]:
    """The 1,000-turn target; a run that stopped earlier judges it only when it is already exceeded
    (a conversation never shrinks as it goes on)."""
    goal = "<= 5 MB and <= 3x RAGFlow"
    if 1000 in lin:
        return (f"{store}: a 1,000-turn conversation", _mb(lin[1000]), goal,
                lin[1000] <= 5 * MB and (theirs is None or lin[1000] <= 3 * theirs))
    last = max(lin)
    if lin[last] > 5 * MB:
        return (f"{store}: a 1,000-turn conversation", f"more than {_mb(lin[last])} (after {last} turns already)", goal, False)
    return (f"{store}: a 1,000-turn conversation", f"not measured (run without --quick)", goal, None)


def _ten_thousand_items(store: str, it: dict[int, int]) -> tuple[str, str, str, bool | None]:
    goal = "<= 50 MB"
    if 10_000 in it:
        return (f"{store}: one turn over 10,000 items", _mb(it[10_000]), goal, it[10_000] <= 50 * MB)
    last = max(it)
    if it[last] > 50 * MB:
        return (f"{store}: one turn over 10,000 items", f"more than {_mb(it[last])} (at {last:,} items already)", goal, False)
    return (f"{store}: one turn over 10,000 items", "not measured (run without --quick)", goal, None)


def table(result: dict, turns: list[int], items: list[int], full: bool) -> str:
    lines = ["| target | figure | goal | verdict |", "|---|---|---|---|"]
    for target, figure, goal, met in rows(result, turns, items, full):
        lines.append(f"| {target} | {figure} | {goal} | {'-' if met is None else 'met' if met else 'NOT MET'} |")
    return "\n".join(lines)


async def measure(stores: list[str], turns: list[int], timed: list[int], items: list[int], folder: Path) -> dict:
    result: dict[str, Any] = {"stores": {}}
    for store in stores:
        if store == "sqlite":
            def url_of(name: str) -> str:
                return str(folder / f"{name}.db")
        else:
            def url_of(name: str) -> str:
                return PG_URL
        print(f"{store}: linear, {max(turns)} turns ...", file=sys.stderr, flush=True)
        lin = await linear(url_of("linear"), turns, timed, url_of("warm-up"))
        print(f"{store}: iteration over {items} items ...", file=sys.stderr, flush=True)
        result["stores"][store] = {"linear": lin, "iteration": await iteration(url_of, items)}
    return result


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="100 turns and 1,000 items: a smoke run")
    ap.add_argument("--stores", default="sqlite,postgres", help="comma-separated: sqlite, postgres")
    ap.add_argument("--no-ragflow", action="store_true", help="leave RAGFlow's column out")
    ap.add_argument("--json", help="also write every figure to this file")
    ap.add_argument("--items", help="comma-separated item counts of the `iteration` case (default 100,1000,10000; "
                                    "--quick: 100,1000)")
    args = ap.parse_args(argv)
    turns, timed, items = ([10, 100], [10, 100], [100, 1_000]) if args.quick else \
        ([10, 100, 1_000], [10, 1_000], [100, 1_000, 10_000])
    if args.items:
        try:
            items = sorted({int(n) for n in args.items.split(",") if n.strip()})
        except ValueError:
            ap.error(f"--items: expected comma-separated whole numbers, got {args.items!r}")
        if not items or min(items) < 1:
            ap.error("--items: give at least one item count of 1 or more")
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(measure(args.stores.split(","), turns, timed, items, Path(tmp)))
    result["ragflow"] = None if args.no_ragflow else ragflow(turns, items)
    print(table(result, turns, items, full=not args.quick))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, default=str))
    return result


if __name__ == "__main__":
    main()
