"""A conversation's history as a plain channel against LangGraph's `DeltaChannel`: bytes and time per turn.

    python -m bench.upstream.delta_channel [--turns 1000] [--snapshot 100] [--postgres URL]

A graph shaped like canvas2graph's `linear` turn (start -> model -> message -> finish, four steps) whose
`history` gains a 200-character question at the start of each turn and a 120-character answer at its end:
once as LangGraph's usual reducer channel (the whole list stored whenever it changes), once as a
`DeltaChannel` (only the appended entries stored, the list rebuilt from the nearest snapshot when a
checkpoint is read). For each, on a SQLite file (LangGraph's `SqliteSaver`) and on PostgreSQL: the bytes
the thread stores after N turns, the median time of a turn around turn 10 and around the last, and the
time of `get_state_history` over the whole thread (what canvas2graph's trace reads).

The measurement behind issue 21's choice of channel layout (docs/performance.md, "Storage").
"""
from __future__ import annotations

import argparse
import operator
import os
import sqlite3
import statistics
import tempfile
import time
import uuid
from typing import Annotated, Any, TypedDict

from langgraph.channels import DeltaChannel
from langgraph.graph import END, START, StateGraph


def _text(n: int) -> str:
    """Text that compresses about as little as prose does (PostgreSQL compresses what it stores)."""
    import base64
    return base64.b64encode(os.urandom(n))[:n].decode()


QUESTION, ANSWER = _text(200), _text(120)


def _extend(state: list, writes: list) -> list:
    out = list(state)
    for w in writes:
        out.extend(w)
    return out


def graph(kind: str, checkpointer: Any, snapshot: int):
    if kind == "delta":
        history: Any = Annotated[list, DeltaChannel(_extend, snapshot_frequency=snapshot)]
    else:
        history = Annotated[list, operator.add]

    State = TypedDict("State", {"query": str, "history": history, "outputs": dict}, total=False)  # type: ignore[misc]

    def start(state: dict) -> dict:
        return {"history": [["user", state.get("query", "")]], "outputs": {"begin": {"q": state.get("query")}}}

    def model(state: dict) -> dict:
        return {"outputs": {"llm": {"content": ANSWER}}}

    def message(state: dict) -> dict:
        return {"outputs": {"msg": {"content": ANSWER}}}

    def finish(state: dict) -> dict:
        return {"history": [["assistant", {"content": ANSWER}]]}

    b = StateGraph(State)
    for name, fn in (("start", start), ("model", model), ("message", message), ("finish", finish)):
        b.add_node(name, fn)
    b.add_edge(START, "start")
    b.add_edge("start", "model")
    b.add_edge("model", "message")
    b.add_edge("message", "finish")
    b.add_edge("finish", END)
    return b.compile(checkpointer=checkpointer)


def stored(saver: Any, url: str | None, thread: str, path: str | None) -> int:
    if path:
        with sqlite3.connect(path) as conn:
            return sum(conn.execute(f"SELECT coalesce(sum(length({c})), 0) FROM {t} WHERE thread_id = ?", (thread,)).fetchone()[0]
                       for t, c in (("checkpoints", "checkpoint"), ("checkpoints", "metadata"), ("writes", "value")))
    import psycopg
    with psycopg.connect(url) as conn:
        return sum(conn.execute(f"SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM {t} t WHERE thread_id = %s",
                                (thread,)).fetchone()[0] for t in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"))


def run(kind: str, saver: Any, turns: int, snapshot: int, url: str | None, path: str | None) -> dict:
    g = graph(kind, saver, snapshot)
    thread = f"delta-{uuid.uuid4()}"
    config = {"configurable": {"thread_id": thread}}
    times = []
    for turn in range(1, turns + 1):
        started = time.perf_counter()
        g.invoke({"query": QUESTION[:190] + f"{turn:>10}"}, config, durability="sync")
        times.append(time.perf_counter() - started)
    assert len(g.get_state(config).values["history"]) == 2 * turns
    started = time.perf_counter()
    steps = sum(1 for _ in g.get_state_history(config))
    history_s = time.perf_counter() - started
    return {"bytes": stored(saver, url, thread, path), "early_ms": statistics.median(times[5:14]) * 1000,
            "late_ms": statistics.median(times[-9:]) * 1000, "history_ms": history_s * 1000, "steps": steps}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--snapshot", type=int, default=100, help="DeltaChannel's snapshot_frequency")
    ap.add_argument("--postgres", default=os.environ.get("CANVAS2GRAPH_BENCH_PG"), help="also on this PostgreSQL")
    args = ap.parse_args()
    print(f"| store | history channel | bytes after {args.turns} turns | turn ~10 | turn ~{args.turns} | "
          f"get_state_history ({4 * args.turns}+ steps) |\n|---|---|---:|---:|---:|---:|")
    for kind in ("plain", "delta"):
        with tempfile.TemporaryDirectory() as tmp:
            from langgraph.checkpoint.sqlite import SqliteSaver
            path = os.path.join(tmp, "s.db")
            with SqliteSaver.from_conn_string(path) as saver:
                r = run(kind, saver, args.turns, args.snapshot, None, path)
            print(f"| SQLite | {kind} | {r['bytes'] / 1e6:.2f} MB | {r['early_ms']:.2f} ms | {r['late_ms']:.2f} ms | "
                  f"{r['history_ms']:.0f} ms |", flush=True)
        if args.postgres:
            from langgraph.checkpoint.postgres import PostgresSaver
            with PostgresSaver.from_conn_string(args.postgres) as saver:
                saver.setup()
                r = run(kind, saver, args.turns, args.snapshot, args.postgres, None)
            print(f"| PostgreSQL | {kind} | {r['bytes'] / 1e6:.2f} MB | {r['early_ms']:.2f} ms | {r['late_ms']:.2f} ms | "
                  f"{r['history_ms']:.0f} ms |", flush=True)


if __name__ == "__main__":
    main()
