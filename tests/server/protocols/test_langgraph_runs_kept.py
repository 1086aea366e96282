"""What a server process keeps of its LangGraph runs' streams (for `join_stream`): the frames of its latest
finished runs, bounded in number and in bytes (an `events` frame carries the whole state), never those of
a run still running."""
from __future__ import annotations

from canvas2graph.server.protocols.langgraph_runs import Run, Runs


async def started(runs: Runs, name: str, frames: int, size: int, *, done: bool = True) -> Run:
    run = Run(row={"run_id": name}, tenant="t")
    runs.local[name] = run
    for _ in range(frames):
        await runs._add(run, b"x" * size)
    if done:
        run.done.set()
    return run


async def test_the_oldest_finished_runs_go_first_beyond_the_count_or_the_bytes_kept():
    runs = Runs()
    for i in range(5):
        await started(runs, f"r{i}", frames=10, size=100)             # 1000 bytes each
    assert runs.kept_bytes == 5000
    runs.forget_finished(keep=3, keep_bytes=10_000)
    assert list(runs.local) == ["r2", "r3", "r4"] and runs.kept_bytes == 3000
    runs.forget_finished(keep=3, keep_bytes=1500)
    assert list(runs.local) == ["r4"] and runs.kept_bytes == 1000


async def test_a_running_run_keeps_its_frames_and_those_of_the_runs_after_it():
    runs = Runs()
    running = await started(runs, "running", frames=4, size=1000, done=False)
    await started(runs, "later", frames=4, size=1000)
    runs.forget_finished(keep=1, keep_bytes=100)
    assert list(runs.local) == ["running", "later"] and len(running.frames) == 4
    running.done.set()
    runs.forget_finished(keep=1, keep_bytes=100)
    assert list(runs.local) == [] and runs.kept_bytes == 0
