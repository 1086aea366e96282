"""How the cost of a session's message log grows with the conversation.

    python -m bench.message_log                      # SQLite, 5,000 turns
    python -m bench.message_log --db postgresql://postgres@127.0.0.1:5432/test --turns 2000
    python -m bench.message_log --json log.json      # also write the figures (bench.targets reads them)

Each turn logs its question and its answer (300 characters each, as a worker does: `Store.append_messages`)
and reads the session as a worker does before a turn (`Store.get_session`). Printed: the CPU of that, per turn,
at turns 10, 100, 1,000 and the last. Pass (exit 0): the last turn costs at most 3x the tenth. (Until the log
became a table, a row per message, the whole log was read and written back at each append: 0.4 ms at turn 10,
272 ms at turn 5,000.)
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from canvas2graph.server.backend.store import open_store  # noqa: E402

DSL = {"components": {"begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": []}}}
TEXT = "x" * 300
LIMIT = 3.0


async def measure(db: str, turns: int) -> dict[int, float]:
    """turn -> CPU ms to log its two messages and read the session, at the marked turns."""
    marks = sorted({10, 100, 1000, turns} & set(range(1, turns + 1)))
    found: dict[int, float] = {}
    async with open_store(db) as store:
        tenant = f"bench-{uuid.uuid4().hex[:6]}"
        session = await store.create_session(tenant, source="agent", dsl=DSL)
        for turn in range(1, turns + 1):
            started = time.process_time()
            await store.append_messages(session.id, [{"role": "user", "content": TEXT, "id": f"m{turn}"}])
            await store.append_messages(session.id, [{"role": "assistant", "content": TEXT, "id": f"m{turn}"}],
                                        {"chunks": {}})
            await store.get_session(tenant, session.id)
            if turn in marks:
                found[turn] = (time.process_time() - started) * 1000
        await store.delete_sessions(tenant, [session.id])
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.message_log", description=__doc__.splitlines()[0])
    p.add_argument("--db", help="a SQLite path or a postgresql:// URL (default: a new SQLite file)")
    p.add_argument("--turns", type=int, default=5000)
    p.add_argument("--json", help="also write the figures to this file")
    args = p.parse_args(argv)
    db = args.db or os.path.join(tempfile.mkdtemp(prefix="c2g-log-"), "sessions.db")
    found = asyncio.run(measure(db, args.turns))
    for turn, ms in found.items():
        print(f"turn {turn:>6,}: {ms:6.2f} ms CPU to log its question and answer and read the session")
    first, last = found[min(found)], found[max(found)]
    ratio = last / first if first else float("inf")
    met = ratio <= LIMIT
    print(f"last / turn {min(found)}: {ratio:.1f}x (goal <= {LIMIT:.0f}x): {'met' if met else 'NOT MET'}")
    if args.json:
        Path(args.json).write_text(json.dumps({"per_turn_ms": found, "first": min(found), "last": max(found),
                                               "ratio": ratio, "limit": LIMIT, "met": met}, indent=2) + "\n")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
