"""What RAGFlow's memories cost on LangGraph's stores (issue 35): bytes per message, saves, searches, forgetting.

    python -m bench.memory                    # the full run (10,000 messages, FIFO over 5,000 saves, both stores):
                                              # about 13 min on 2 cores
    python -m bench.memory --quick            # 400 messages, FIFO over 300 saves: a smoke run (about 35 s)
    python -m bench.memory --stores sqlite    # leave PostgreSQL out
    python -m bench.memory --messages 3000    # another N (marks at N/10 and N)
    python -m bench.memory --pg postgresql://postgres@127.0.0.1:5432   # the server to make the run's database on
    python -m bench.memory --json out.json    # also write every figure (bench.targets reads them)

The stores are those a server opens (`runtime/services/memory/stores.py`, `open_memory_store`): LangGraph's
`AsyncSqliteStore` in `memory.db` beside a fresh sessions file, and `AsyncPostgresStore` in a database of the
run's own (`c2g_bench_memory_<hex>`, created on the server and dropped after). On each, through `MemoryBook`
as the Message and Retrieval components use it:

- growth: N raw exchanges (a user input of 60-140 characters and an agent response of 140-260, so 200-400 a
  message, words drawn Zipf-like from a vocabulary of about 500 plus order numbers) saved one at a time with
  `add_exchange` into one memory of `memory_size` 10 MiB (RAGFlow's largest, enough to forget nothing). At N/10
  and N: the store's growth per message (SQLite: the file, and its WAL if any, after a checkpoint; PostgreSQL:
  `pg_total_relation_size` of LangGraph's `store` table, its indexes and TOAST) beside RAGFlow's counted size
  (`records.message_size`, what `memory_size` is checked against); the mean wall time of the saves leading to
  the mark (the last half, at most 500); search (30 queries of 2-6 words, text ranking, no embedding model)
  p50 / p95; `recent` (10 newest) and `page` (first 50) medians; and reading every message back (the scan under
  all three), checking each comes back once.
- FIFO: a second memory whose `memory_size` holds about 2,000 of these messages, 5,000 saves; the usage after
  every save (never above `memory_size`), which messages are left (the newest), and the time of the saves that
  forgot against those that did not.

Goals (exit 0 when met): saves at N within 1.5x of saves at N/10 (the median of each window: a save must not
slow as the memory grows; one fsync stall or a busy neighbour moves a mean);
FIFO usage never above memory_size and the newest messages kept; every message read back exactly once.
Search, recent and page are stated with their growth (messages x10): they read the whole memory.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

if __package__ in (None, ""):          # `python bench/memory.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from canvas2graph.runtime.services.memory import MemoryBook, ranking  # noqa: E402
from canvas2graph.runtime.services.memory.book import PAGE  # noqa: E402
from canvas2graph.runtime.services.memory.records import SIZE_LIMIT, exchange_text, message_size  # noqa: E402
from canvas2graph.runtime.services.memory.stores import memory_path, open_memory_store  # noqa: E402

SERVER = os.environ.get("CANVAS2GRAPH_BENCH_PG_SERVER", "postgresql://postgres@127.0.0.1:5432")
TENANT = "bench"
SAVE_GOAL = 1.5          # saves at N against saves at N/10
WINDOW = 500             # a mark's save figure: the mean of the last half of the saves before it, at most this many

FUNCTION = ("the a an to of and for with about on in at from by my your our their this that it is was are were "
            "be can could would should will please also then so but if when how what which why who I you we "
            "they he she me us them not no yes just only more most some any all each every").split()
CONTENT = """
order delivery parcel refund invoice payment card transfer account password login email address phone number
shop store price discount coupon warranty repair battery screen laptop printer cable charger adapter router
network wifi server database backup upload download file folder document report spreadsheet slide meeting
calendar schedule deadline project budget quarter forecast revenue expense travel flight hotel train ticket
booking passport visa airport luggage seat window aisle breakfast dinner lunch recipe kitchen oven chicken rice
pasta salad soup bread cheese coffee tea sugar salt garden flower tree water soil seed fertilizer lawn fence
weather rain snow storm forecast temperature morning evening weekend holiday birthday party gift family child
school teacher homework exam grade course lesson library book author chapter story poem language grammar word
doctor appointment prescription medicine pharmacy symptom fever cough allergy exercise running swimming gym
yoga sleep diet vitamin insurance policy claim contract lease rent mortgage bank loan interest saving pension
tax return receipt salary bonus promotion manager colleague team interview resume career skill training
software update install version bug error crash log feature release deploy test code python script function
api token key secret permission role user group admin settings profile notification message chat reply
music song album playlist concert guitar piano movie series episode actor camera photo video album picture
car engine tire brake fuel mileage parking garage license registration bicycle bus subway taxi route map
city street neighborhood apartment house room furniture sofa table chair lamp curtain carpet paint wall
cleaning laundry dishwasher vacuum repairman plumber electrician heating cooling window door lock key alarm
dog cat vet food walk leash toy groom vaccine puppy kitten bird fish aquarium hamster rabbit turtle horse
energy solar panel electricity bill meter gas provider tariff contract switch saving usage peak hour
history museum gallery exhibition ticket tour guide castle church bridge river mountain lake beach island
research paper experiment result data sample model graph chart analysis method theory hypothesis survey
customer supplier invoice shipment warehouse stock inventory product catalog brand label package return
""".split()
ASKS = ("Can you", "Could you please", "Please", "I need you to", "Help me", "Remind me to", "Tell me how to",
        "What is the best way to", "Why did you", "When can I")
VERBS = ("check", "change", "cancel", "track", "compare", "update", "explain", "summarize", "find", "book",
         "schedule", "fix", "plan", "send", "move", "renew", "review", "order", "confirm", "prepare")


def _zipf(words: list[str], s: float = 0.9) -> list[float]:
    return [1 / (rank + 1) ** s for rank in range(len(words))]


def _text(rnd: random.Random, low: int, high: int, opening: str = "") -> str:
    """Sentences of function and content words (Zipf-like), now and then an order number, cut to low-high chars."""
    target = rnd.randint(low, high)
    words: list[str] = [opening] if opening else []
    length = len(opening)
    weights = _zipf(CONTENT)
    while length < target:
        r = rnd.random()
        if r < 0.40:
            w = rnd.choice(FUNCTION)
        elif r < 0.97:
            w = rnd.choices(CONTENT, weights)[0]
        else:
            w = f"#{rnd.randint(10000, 99999)}"
        if rnd.random() < 0.08:
            w += rnd.choice(".,?")
        words.append(w)
        length += len(w) + 1
    text = " ".join(words)[:target].rsplit(" ", 1)[0]
    return text[0].upper() + text[1:] + "."


def exchanges(n: int, seed: int) -> list[tuple[str, str]]:
    """n (user input, agent response): 60-140 and 140-260 characters."""
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        ask = f"{rnd.choice(ASKS)} {rnd.choice(VERBS)} the {rnd.choices(CONTENT, _zipf(CONTENT))[0]}"
        out.append((_text(rnd, 60, 140, ask), _text(rnd, 140, 260, "Sure.")))
    return out


def queries(n: int, seed: int = 3) -> list[str]:
    rnd = random.Random(seed)
    return [" ".join(rnd.choices(CONTENT, _zipf(CONTENT), k=rnd.randint(2, 6))) for _ in range(n)]


def counted(exchange: tuple[str, str]) -> int:
    """What RAGFlow counts a raw message at against memory_size (no vector)."""
    return message_size(exchange_text(*exchange), None)


# --- the stores' bytes --------------------------------------------------------------------------------
class Disk:
    """The store's bytes on disk, and the stored size of one memory's rows."""

    def __init__(self, kind: str, where: str):
        self.kind, self.where = kind, where      # sqlite: memory.db's path; postgres: the database's URL

    async def total(self) -> int:
        if self.kind == "sqlite":
            with sqlite3.connect(self.where) as conn:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")     # a no-op unless the file is in WAL mode
            return sum(os.path.getsize(p) for p in (self.where, self.where + "-wal") if os.path.exists(p))
        import psycopg
        async with await psycopg.AsyncConnection.connect(self.where, autocommit=True) as conn:
            row = await (await conn.execute("SELECT pg_total_relation_size('store')")).fetchone()
        return int(row[0])

    async def rows(self, namespace: tuple[str, ...]) -> dict[str, float]:
        """Rows of a namespace: count, mean stored bytes of a row and of its value."""
        prefix = ".".join(namespace)
        if self.kind == "sqlite":
            with sqlite3.connect(self.where) as conn:
                n, row, value = conn.execute(
                    "SELECT count(*), avg(length(prefix) + length(key) + length(CAST(value AS BLOB)) + length(created_at) "
                    "+ length(updated_at)), "
                    "avg(length(CAST(value AS BLOB))) FROM store WHERE prefix = ?", (prefix,)).fetchone()
        else:
            import psycopg
            async with await psycopg.AsyncConnection.connect(self.where, autocommit=True) as conn:
                n, row, value = await (await conn.execute(
                    "SELECT count(*), avg(pg_column_size(s.*)), avg(pg_column_size(s.value)) FROM store s "
                    "WHERE prefix = %s", (prefix,))).fetchone()
        return {"rows": int(n), "row_bytes": float(row or 0), "value_bytes": float(value or 0)}


def _ms(seconds: float) -> float:
    return seconds * 1000


def nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


async def _median_ms(make, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        await make()
        times.append(_ms(time.perf_counter() - t0))
    return statistics.median(times)


# --- one store ------------------------------------------------------------------------------------------
async def growth(book: MemoryBook, disk: Disk, n: int, marks: list[int], asks: list[str],
                 progress: str) -> dict[str, Any]:
    data = exchanges(n, seed=1)
    before = await disk.total()
    memory = await book.create("growth", ["raw"], memory_size=SIZE_LIMIT)
    after_create = await disk.total()
    need = sum(counted(e) for e in data)
    if need > SIZE_LIMIT:
        raise SystemExit(f"{n:,} messages count {need:,} bytes, above memory_size's limit {SIZE_LIMIT:,}: "
                         "forgetting would start; use fewer --messages")
    wall: list[float] = []
    cpu: list[float] = []
    out: dict[str, Any] = {"empty_store_bytes": before, "memory_created_bytes": after_create, "marks": {}}
    for i, (user, answer) in enumerate(data, 1):
        w0, c0 = time.perf_counter(), time.process_time()
        await book.add_exchange([memory.id], user_input=user, agent_response=answer, agent_id="agent",
                                session_id=f"session-{i // 20}")
        wall.append(_ms(time.perf_counter() - w0))
        cpu.append(_ms(time.process_time() - c0))
        if i % max(n // 10, 1) == 0:
            print(f"  {progress}: {i:,} saved, last {WINDOW} saves {statistics.mean(wall[-WINDOW:]):.1f} ms each",
                  flush=True)
        if i not in marks:
            continue
        window = min(WINDOW, max(i // 2, 1))
        total = await disk.total()
        t0 = time.perf_counter()
        everything = await book.messages(memory.id)
        scan_ms = _ms(time.perf_counter() - t0)
        ids = [m.message_id for m in everything]
        values = [m.value() for m in everything]
        json_bytes = statistics.mean(len(json.dumps(v, separators=(",", ":"))) for v in values)
        token_bytes = statistics.mean(len(json.dumps(v["tokens"], separators=(",", ":"))) for v in values)
        namespace = book._messages(memory.id)
        page_first = await _median_ms(lambda ns=namespace: book.store.asearch(ns, limit=PAGE, offset=0), 5)
        page_last = await _median_ms(lambda ns=namespace, last=max(i - PAGE, 0):
                                     book.store.asearch(ns, limit=PAGE, offset=last), 5)
        search_ms, hits = [], []
        for q in asks:
            t0 = time.perf_counter()
            found = await book.search([memory.id], q)
            search_ms.append(_ms(time.perf_counter() - t0))
            hits.append(len(found))
        out["marks"][i] = {
            "messages": i,
            "read_back": len(ids), "read_back_distinct": len(set(ids)),
            "store_bytes": total, "store_growth_per_message": (total - after_create) / i,
            "counted_per_message": await book.usage(memory.id) / i,
            "rows": await disk.rows(book._messages(memory.id)),
            "value_json_bytes": json_bytes, "tokens_json_bytes": token_bytes,
            "save_window": [i - window + 1, i],
            "save_mean_ms": statistics.mean(wall[-window:]), "save_median_ms": statistics.median(wall[-window:]),
            "save_cpu_mean_ms": statistics.mean(cpu[-window:]),
            "scan_ms": scan_ms, "store_page_first_ms": page_first, "store_page_last_ms": page_last,
            "search_p50_ms": nearest_rank(search_ms, 0.5), "search_p95_ms": nearest_rank(search_ms, 0.95),
            "search_hits_mean": statistics.mean(hits),
            "recent_ms": await _median_ms(lambda: book.recent([memory.id], limit=10), 10),
            "page_ms": await _median_ms(lambda: book.page(memory.id, page=1, page_size=50), 5),
        }
    out["save_mean_ms_all"] = statistics.mean(wall)
    out["memory_id"] = memory.id
    return out


async def fifo(book: MemoryBook, saves: int, hold: int, progress: str) -> dict[str, Any]:
    data = exchanges(saves, seed=2)
    size = int(statistics.mean(counted(e) for e in data) * hold)
    memory = await book.create("fifo", ["raw"], memory_size=size)
    ids: list[int] = []
    forgetting: list[float] = []
    plain: list[float] = []
    worst_usage = 0
    for i, exchange in enumerate(data, 1):
        used = await book.usage(memory.id)
        t0 = time.perf_counter()
        saved = await book.add_exchange([memory.id], user_input=exchange[0], agent_response=exchange[1])
        ms = _ms(time.perf_counter() - t0)
        ids.append(saved[memory.id])
        now = await book.usage(memory.id)
        worst_usage = max(worst_usage, now)
        (forgetting if now < used + counted(exchange) else plain).append(ms)
        if i % max(saves // 5, 1) == 0:
            print(f"  {progress}: {i:,} saved, {len(forgetting)} forgetting passes", flush=True)
    kept = [m.message_id for m in await book.messages(memory.id)]
    newest = set(ids[-len(kept):]) if kept else set()
    after_first = plain[hold:] if len(plain) > hold else plain       # the saves once the memory is full
    return {"memory_size": size, "hold": hold, "saves": saves, "worst_usage": worst_usage,
            "usage_end": await book.usage(memory.id), "kept": len(kept), "kept_newest": set(kept) == newest,
            "forgetting_saves": len(forgetting),
            "forgetting_mean_ms": statistics.mean(forgetting) if forgetting else None,
            "forgetting_max_ms": max(forgetting) if forgetting else None,
            "plain_mean_ms": statistics.mean(plain), "plain_median_ms": statistics.median(plain),
            "plain_mean_ms_full": statistics.mean(after_first) if after_first else None,
            "mean_ms_all": statistics.mean(forgetting + plain),
            "amortised_forgetting_ms": sum(forgetting) / len(data)}


async def measure_store(kind: str, db: str, where: str, args: argparse.Namespace) -> dict[str, Any]:
    asks = queries(args.queries)
    marks = sorted({max(args.messages // 10, 1), args.messages})
    ranking.tokens("warm up the tokenizer")        # its first call loads RAGFlow's dictionary
    async with open_memory_store(db) as store:
        book = MemoryBook(store, TENANT)
        started = time.perf_counter()
        found = {"store": kind, "growth": await growth(book, Disk(kind, where), args.messages, marks, asks,
                                                      f"{kind} growth")}
        found["growth_s"] = time.perf_counter() - started
        started = time.perf_counter()
        found["fifo"] = await fifo(book, args.fifo_saves, args.fifo_hold, f"{kind} FIFO")
        found["fifo_s"] = time.perf_counter() - started
    return found


def run_sqlite(args: argparse.Namespace) -> dict[str, Any]:
    tmp = tempfile.mkdtemp(prefix="c2g-memory-")
    try:
        db = os.path.join(tmp, "sessions.db")
        return asyncio.run(measure_store("sqlite", db, memory_path(db), args))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_postgres(args: argparse.Namespace) -> dict[str, Any]:
    import psycopg
    server = args.pg.rstrip("/")
    name = f"c2g_bench_memory_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server + "/postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        url = f"{server}/{name}"
        return asyncio.run(measure_store("postgres", url, url, args))
    finally:
        with psycopg.connect(server + "/postgres", autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


# --- the report -------------------------------------------------------------------------------------------
def goals(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each goal: measured, goal, met."""
    g = result["growth"]
    marks = sorted(g["marks"], key=int)
    first, last = g["marks"][marks[0]], g["marks"][marks[-1]]
    ratio = last["save_median_ms"] / first["save_median_ms"]     # the median: an fsync stall or a busy
    mean = last["save_mean_ms"] / first["save_mean_ms"]              # neighbour moves the mean of a few hundred
    f = result["fifo"]
    whole = all(m["read_back"] == m["messages"] == m["read_back_distinct"] for m in g["marks"].values())
    return {
        "save": {"measured": f"median {ratio:.2f}x ({last['save_median_ms']:.2f} / {first['save_median_ms']:.2f} ms; "
                            f"mean {mean:.2f}x)",
                 "goal": f"<= {SAVE_GOAL}x", "met": ratio <= SAVE_GOAL, "ratio": ratio},
        "fifo_usage": {"measured": f"max {f['worst_usage']:,} of {f['memory_size']:,} bytes",
                       "goal": "<= memory_size", "met": f["worst_usage"] <= f["memory_size"]},
        "fifo_order": {"measured": f"{f['kept']:,} newest kept" if f["kept_newest"] else "not the newest kept",
                       "goal": "the newest kept", "met": f["kept_newest"]},
        "read_back": {"measured": ", ".join(f"{m['read_back_distinct']:,} distinct of {m['read_back']:,} read, "
                                            f"{m['messages']:,} saved" for m in g["marks"].values()),
                      "goal": "each message once", "met": whole},
    }


def table(results: list[dict[str, Any]]) -> list[str]:
    names = {"sqlite": "SQLite (memory.db)", "postgres": "PostgreSQL"}
    lines = ["| figure | " + " | ".join(names[r["store"]] for r in results) + " |",
             "|---|" + "---:|" * len(results)]

    def row(label_: str, cell) -> None:
        lines.append(f"| {label_} | " + " | ".join(cell(r) for r in results) + " |")

    marks = sorted(results[0]["growth"]["marks"], key=int)
    lo, hi = marks[0], marks[-1]
    m = lambda r, k: r["growth"]["marks"][k]  # noqa: E731
    for k in marks:
        row(f"store growth per message, {int(k):,} messages",
            lambda r, k=k: f"{m(r, k)['store_growth_per_message']:,.0f} B")
    row(f"stored row of a message (mean, {int(hi):,}): whole row / its value",
        lambda r: f"{m(r, hi)['rows']['row_bytes']:,.0f} / {m(r, hi)['rows']['value_bytes']:,.0f} B")
    row("a message's value as JSON, of which its search tokens",
        lambda r: f"{m(r, hi)['value_json_bytes']:,.0f} B, {m(r, hi)['tokens_json_bytes']:,.0f} B")
    row("RAGFlow's counted size per message (records.message_size)",
        lambda r: f"{m(r, hi)['counted_per_message']:,.0f} B")
    row(f"store growth / counted size, {int(hi):,}",
        lambda r: f"{m(r, hi)['store_growth_per_message'] / m(r, hi)['counted_per_message']:.1f}x")
    for k in marks:
        row(f"save, mean (median) ms, saves {m(results[0], k)['save_window'][0]:,}-{int(k):,}",
            lambda r, k=k: f"{m(r, k)['save_mean_ms']:.2f} ({m(r, k)['save_median_ms']:.2f}), "
                           f"CPU {m(r, k)['save_cpu_mean_ms']:.2f}")
    row(f"save at {int(hi):,} / at {int(lo):,}", lambda r: f"**{m(r, hi)['save_mean_ms'] / m(r, lo)['save_mean_ms']:.2f}x**")
    for k in marks:
        row(f"search p50 / p95 ms, {int(k):,} messages ({len(results[0]['queries'])} queries)",
            lambda r, k=k: f"{m(r, k)['search_p50_ms']:,.1f} / {m(r, k)['search_p95_ms']:,.1f}")
    row(f"search p50 at {int(hi):,} / at {int(lo):,} (messages x{int(hi) / int(lo):.0f})",
        lambda r: f"**{m(r, hi)['search_p50_ms'] / m(r, lo)['search_p50_ms']:.1f}x**")
    for k in marks:
        row(f"reading every message back (the scan under search), {int(k):,}",
            lambda r, k=k: f"{m(r, k)['scan_ms']:,.1f} ms")
    row(f"scan at {int(hi):,} / at {int(lo):,}", lambda r: f"**{m(r, hi)['scan_ms'] / m(r, lo)['scan_ms']:.1f}x**")
    for k in marks:
        row(f"one store page of {PAGE} (LangGraph's asearch), first / last, median ms, {int(k):,}",
            lambda r, k=k: f"{m(r, k)['store_page_first_ms']:,.1f} / {m(r, k)['store_page_last_ms']:,.1f}")
    row(f"first page at {int(hi):,} / at {int(lo):,}",
        lambda r: f"**{m(r, hi)['store_page_first_ms'] / m(r, lo)['store_page_first_ms']:.1f}x**")
    for k in marks:
        row(f"recent (10 newest) / page (first 50), median ms, {int(k):,}",
            lambda r, k=k: f"{m(r, k)['recent_ms']:,.1f} / {m(r, k)['page_ms']:,.1f}")
    row(f"recent at {int(hi):,} / at {int(lo):,}", lambda r: f"**{m(r, hi)['recent_ms'] / m(r, lo)['recent_ms']:.1f}x**")
    f = lambda r: r["fifo"]  # noqa: E731
    row("FIFO: memory_size (holds ~N messages), saves",
        lambda r: f"{f(r)['memory_size']:,} B (~{f(r)['hold']:,}), {f(r)['saves']:,}")
    row("FIFO: highest usage after a save / memory_size",
        lambda r: f"{f(r)['worst_usage']:,} ({f(r)['worst_usage'] / f(r)['memory_size']:.3f})")
    row("FIFO: messages kept at the end (the newest)",
        lambda r: f"{f(r)['kept']:,} ({'newest' if f(r)['kept_newest'] else 'NOT the newest'})")
    row("FIFO: saves that forgot: count, mean / max ms",
        lambda r: f"{f(r)['forgetting_saves']}, {f(r)['forgetting_mean_ms'] or 0:,.1f} / {f(r)['forgetting_max_ms'] or 0:,.1f}")
    row("FIFO: saves that did not: mean (median) ms",
        lambda r: f"{f(r)['plain_mean_ms']:.2f} ({f(r)['plain_median_ms']:.2f})")
    row("FIFO: forgetting save / plain save",
        lambda r: f"**{(f(r)['forgetting_mean_ms'] or 0) / f(r)['plain_mean_ms']:.1f}x**")
    row("FIFO: forgetting, amortised over every save", lambda r: f"{f(r)['amortised_forgetting_ms']:.2f} ms")
    row("run time: growth, FIFO", lambda r: f"{r['growth_s']:.0f} s, {r['fifo_s']:.0f} s")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="400 messages, FIFO over 300 saves holding ~100, 10 queries")
    p.add_argument("--messages", type=int, help="messages of the growth memory (default 10,000; quick 400)")
    p.add_argument("--fifo-saves", type=int, help="saves into the FIFO memory (default 5,000; quick 300)")
    p.add_argument("--fifo-hold", type=int, help="messages the FIFO memory holds (default 2,000; quick 100)")
    p.add_argument("--queries", type=int, help="search queries at each mark (default 30; quick 10)")
    p.add_argument("--stores", default="sqlite,postgres", help="sqlite, postgres or both (comma-separated)")
    p.add_argument("--pg", default=SERVER, help=f"the PostgreSQL server to make the run's database on ({SERVER})")
    p.add_argument("--json", help="also write every figure to this file")
    args = p.parse_args(argv)
    args.messages = args.messages or (400 if args.quick else 10000)
    args.fifo_saves = args.fifo_saves or (300 if args.quick else 5000)
    args.fifo_hold = args.fifo_hold or (100 if args.quick else 2000)
    args.queries = args.queries or (10 if args.quick else 30)
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    results = []
    for kind in stores:
        print(f"{kind}: {args.messages:,} messages, then FIFO: {args.fifo_saves:,} saves into ~{args.fifo_hold:,}",
              flush=True)
        result = run_sqlite(args) if kind == "sqlite" else run_postgres(args)
        result["queries"] = queries(args.queries)
        result["goals"] = goals(result)
        results.append(result)
    print(f"\n## Memories: {args.messages:,} raw exchanges of 200-400 characters, text ranking\n")
    print("\n".join(table(results)))
    print()
    met = True
    for r in results:
        for name, g in r["goals"].items():
            met &= bool(g["met"])
            print(f"{r['store']}: {name}: {g['measured']} (goal {g['goal']}): {'met' if g['met'] else 'NOT MET'}")
    if args.json:
        Path(args.json).write_text(json.dumps({"messages": args.messages, "results": results, "met": met},
                                              indent=2, default=str) + "\n")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
