"""Compiling a DSL for a request without blocking the server: in a child process, within a time and a
memory budget.

A request's DSL is untrusted input. `diagnose()` is linear in it (docs/robustness.md), but a 16 MB
DSL still takes seconds of CPU and a good deal of memory, and the server's event loop serves every
other request and stream meanwhile. So each check runs in a worker process: the loop only waits on a
pipe. A worker lives under an address-space limit (`memory_mb` above what it needs at rest); a job
that outruns `timeout` seconds gets its worker killed and replaced. Either way the request gets a
diagnostic that names the limit, and `/health` and everyone else's streams carry on.

Once a DSL is known to compile within budget, the server compiles it for running in a thread
(`compile_in_thread`), cached by content: bounded work, and the loop keeps its turn.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import multiprocessing
import os
from collections import OrderedDict
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import orjson

log = logging.getLogger("canvas2graph.server")

DEFAULT_TIMEOUT = 10.0
DEFAULT_MEMORY_MB = 1024
VERDICTS_KEPT = 512


@dataclass
class Verdict:
    """What a worker found: whether the DSL compiles, its diagnostics (as dicts), and what routes show."""

    ok: bool
    diagnostics: list[dict] = field(default_factory=list)
    components: int | None = None
    prologue: str = ""
    mermaid: str | None = None
    graph: dict | None = None

    @property
    def errors(self) -> list[dict]:
        return [d for d in self.diagnostics if d.get("severity") == "error"]


def _limit(code: str, message: str) -> Verdict:
    return Verdict(ok=False, diagnostics=[{"code": code, "message": message, "severity": "error"}])


# --- the worker process ------------------------------------------------------------------------------
def _worker(conn: Connection, memory_mb: int) -> None:
    """Answer jobs (DSL JSON bytes) with verdicts until the pipe closes."""
    import resource

    from canvas2graph.compiler.canvas import diagnose
    from canvas2graph.compiler.export import to_json, to_mermaid

    # load everything a job uses (every component family, the exporters) before measuring the baseline,
    # so that no job pays for imports within its time budget
    warm, _ = diagnose({"components": {"begin": {"obj": {"component_name": "Begin", "params": {}}}}})
    to_mermaid(warm.plan), to_json(warm.plan)
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[0])
        baseline = pages * os.sysconf("SC_PAGE_SIZE")
        budget = baseline + memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (budget, budget))
    except (OSError, ValueError, AttributeError):
        log.warning("the compile worker runs without a memory limit on this system")
    conn.send("ready")
    while True:
        try:
            job = conn.recv_bytes()
        except (EOFError, OSError):
            return
        try:
            compiled, diags = diagnose(job)
            verdict = Verdict(ok=compiled is not None, diagnostics=[d.to_dict() for d in diags])
            if compiled is not None:
                verdict.components = len(compiled.plan.nodes)
                begin = compiled.plan.nodes.get("begin")
                verdict.prologue = str(getattr(getattr(begin, "params", None), "prologue", "") or "")
                verdict.mermaid = to_mermaid(compiled.plan)
                verdict.graph = to_json(compiled.plan)
            del compiled
        except MemoryError:
            verdict = _limit("compile-memory", f"compiling needs more than {memory_mb} MB, this server's limit "
                             "for one DSL (--compile-memory-mb)")
        except Exception as e:      # noqa: BLE001 - diagnose() never raises; should it, the request says why
            verdict = _limit("compile-failed", f"the compiler failed: {type(e).__name__}: {e}")
        conn.send(verdict)


class _Worker:
    def __init__(self, context, memory_mb: int):
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_worker, args=(child, memory_mb), daemon=True,
                                       name="canvas2graph-compiler")
        self.process.start()
        child.close()

    async def ready(self) -> None:
        if await asyncio.to_thread(self.conn.poll, 120):
            self.conn.recv()

    def kill(self) -> None:
        self.process.kill()
        self.process.join(5)
        self.conn.close()


class CompileWorkers:
    """A few warm worker processes; `check(dsl)` waits for a free one (others keep their turn)."""

    def __init__(self, size: int = 1, timeout: float = DEFAULT_TIMEOUT, memory_mb: int = DEFAULT_MEMORY_MB):
        self.size, self.timeout, self.memory_mb = max(1, size), timeout, memory_mb
        # "spawn": the server has threads (the database's, uvicorn's), which a fork would copy badly
        self._context = multiprocessing.get_context("spawn")
        self._idle: asyncio.Queue[_Worker] = asyncio.Queue()
        self._all: set[_Worker] = set()
        self._verdicts: OrderedDict[str, Verdict] = OrderedDict()

    async def start(self) -> None:
        workers = [self._spawn() for _ in range(self.size)]
        await asyncio.gather(*(w.ready() for w in workers))
        for w in workers:
            self._idle.put_nowait(w)

    def _spawn(self) -> _Worker:
        worker = _Worker(self._context, self.memory_mb)
        self._all.add(worker)
        return worker

    async def _replace(self, worker: _Worker) -> None:
        self._all.discard(worker)
        await asyncio.to_thread(worker.kill)
        fresh = self._spawn()
        await fresh.ready()
        self._idle.put_nowait(fresh)

    async def close(self) -> None:
        for worker in list(self._all):
            worker.kill()
        self._all.clear()

    async def check(self, dsl: Any) -> Verdict:
        """The verdict on a DSL (an object, or its JSON text)."""
        try:
            payload = await asyncio.to_thread(_payload, dsl)
        except (TypeError, ValueError) as e:     # orjson: nesting past its limit, a value JSON has no form for
            from canvas2graph.compiler.dsl.load import too_deep
            deep = await asyncio.to_thread(too_deep, dsl)       # where: the component and field (linear)
            if deep is not None:
                return Verdict(ok=False, diagnostics=[deep.to_dict()])
            return _limit("unreadable", f"the DSL cannot be read as JSON ({e}); a DSL nests at most 200 levels")
        key = hashlib.sha256(payload).hexdigest()
        if key in self._verdicts:
            self._verdicts.move_to_end(key)
            return self._verdicts[key]
        worker = await self._idle.get()
        try:
            verdict = await self._ask(worker, payload)
        except BaseException:
            asyncio.ensure_future(self._replace(worker))       # cancelled mid-job: its answer is unread
            raise
        if verdict.diagnostics and verdict.diagnostics[0].get("code") in ("compile-timeout", "compile-crashed"):
            asyncio.ensure_future(self._replace(worker))
            return verdict
        self._idle.put_nowait(worker)
        self._verdicts[key] = verdict
        while len(self._verdicts) > VERDICTS_KEPT:
            self._verdicts.popitem(last=False)
        return verdict

    async def _ask(self, worker: _Worker, payload: bytes) -> Verdict:
        try:
            await asyncio.to_thread(worker.conn.send_bytes, payload)
            if await asyncio.to_thread(worker.conn.poll, self.timeout):
                return await asyncio.to_thread(worker.conn.recv)
        except (EOFError, OSError, BrokenPipeError):
            return _limit("compile-crashed", "the compiler process ended while compiling this DSL (it probably "
                          f"needed more than the {self.memory_mb} MB this server allows, --compile-memory-mb)")
        return _limit("compile-timeout", f"compiling took longer than {self.timeout:g} s, this server's limit for "
                      "one DSL (--compile-timeout)")


def _payload(dsl: Any) -> bytes:
    if isinstance(dsl, bytes):
        return dsl
    if isinstance(dsl, str):
        return dsl.encode("utf-8", "surrogatepass")
    return orjson.dumps(dsl, option=orjson.OPT_NON_STR_KEYS)


async def compile_in_thread(dsl: Any, **kw: Any):
    """`compile_dsl` for a DSL a worker found to compile: in a thread, so the loop keeps serving."""
    from canvas2graph.compiler.canvas import compile_dsl
    return await asyncio.to_thread(compile_dsl, dsl, **kw)
