"""What the sections of `python -m bench.run` share: the run's settings, session ids, timing and tables.

`time_async_interleaved` runs variants round-robin so that drift hits them all alike; `Stats` keeps the
median and quartiles of a variant's repetitions.
"""
from __future__ import annotations

import gc
import itertools
import os
import statistics
import time
import uuid
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

SCRIPT = {"auto_reply": "reply {n} from {component}"}
QUERY = "hello"
PG_URL = os.environ.get("CANVAS2GRAPH_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")


def runner_durability() -> str | None:
    """The `durability` Runner.run_turn streams with (None: LangGraph's default, "async").

    The graph-only variant and the checkpoint section's hand-written "same durability" variant use it,
    so the comparison follows runtime/run/runner.py as it changes."""
    import inspect
    import re

    import canvas2graph.runtime.run.runner as session
    if isinstance(getattr(session, "DURABILITY", None), str):
        return session.DURABILITY
    found = re.search(r"durability\s*=\s*[\"'](\w+)[\"']", inspect.getsource(session.Runner.run_turn))
    return found.group(1) if found else None


RUNNER_DURABILITY = runner_durability()
DURABILITY_KW = {"durability": RUNNER_DURABILITY} if RUNNER_DURABILITY else {}

_ids = itertools.count()
_RUN = uuid.uuid4().hex[:8]           # session ids unique across runs: a PostgreSQL database outlives us


def fresh_id(prefix: str = "s") -> str:
    return f"{prefix}{_RUN}-{next(_ids)}"


@dataclass
class Stats:
    median_ms: float
    p25_ms: float
    p75_ms: float
    n: int

    @classmethod
    def of(cls, seconds: list[float]) -> "Stats":
        ms = sorted(s * 1000 for s in seconds)
        if len(ms) >= 4:
            q = statistics.quantiles(ms, n=4)
            p25, p75 = q[0], q[2]
        else:
            p25, p75 = ms[0], ms[-1]
        return cls(statistics.median(ms), p25, p75, len(ms))


def time_sync(make: Callable[[], Callable[[], Any]], reps: int, warmup: int) -> Stats:
    """`make()` prepares one repetition outside the timer and returns the callable that is timed."""
    for _ in range(warmup):
        make()()
    samples = []
    for _ in range(reps):
        fn = make()
        gc.collect()
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return Stats.of(samples)


async def time_async_interleaved(variants: dict[str, Callable[[], Callable[[], Awaitable[Any]]]],
                                 reps: int, warmup: int) -> dict[str, Stats]:
    """Run the variants round-robin (rotating their order) so drift hits them all alike."""
    names = list(variants)
    for _ in range(warmup):
        for name in names:
            await variants[name]()()
    samples: dict[str, list[float]] = {n: [] for n in names}
    for r in range(reps):
        order = names[r % len(names):] + names[:r % len(names)]
        gc.collect()               # a full collection per round (~80 ms: once per round, not per turn)
        for name in order:
            run = variants[name]()
            gc.collect(1)          # young garbage one variant left is not collected while another is timed
            t0 = time.perf_counter()
            await run()
            samples[name].append(time.perf_counter() - t0)
    return {n: Stats.of(s) for n, s in samples.items()}


def table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    return [line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows]


def fmt(ms: float) -> str:
    return f"{ms:.3f}" if ms < 1 else f"{ms:.2f}" if ms < 100 else f"{ms:.0f}"
