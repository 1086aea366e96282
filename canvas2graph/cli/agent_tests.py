"""`canvas2graph test` and `canvas2graph record` (registered in canvas2graph/cli/main.py)."""
from __future__ import annotations

import asyncio
import sys
import time

from canvas2graph.types import UsageError

__all__ = ["cmd_test", "cmd_record"]


def cmd_test(args) -> int:
    """Run every case under the paths; exit 1 when any fails, saying what differs."""
    from canvas2graph.server.backend.agent_tests.case import CaseError, find_cases, load_case, save_case
    from canvas2graph.server.backend.agent_tests.replay import run_case, updated_expect
    try:
        folders = find_cases(args.paths)
        cases = [load_case(folder) for folder in folders]
    except CaseError as e:
        raise UsageError(str(e))
    results, seconds = [], []
    for case in cases:
        started = time.perf_counter()
        result = asyncio.run(run_case(case, dsl=args.dsl, db=args.db))
        seconds.append(time.perf_counter() - started)
        results.append(result)
        if args.update and result.error is None and not result.passed:
            for turn, ran in zip(case.turns, result.turns):
                turn.expect = updated_expect(turn.expect, ran.observed, ran.events)
            save_case(case)
            print(f"updated {case.name} ({case.path})")
            continue
        if result.passed:
            print(f"PASS {case.name} ({case.folder})")
        else:
            print(f"FAIL {case.name} ({case.folder})")
            for line in result.report().splitlines():
                print(f"  {line}")
    if args.junit:
        from canvas2graph.server.backend.agent_tests.junit import write_junit
        write_junit(results, args.junit, seconds)
    failed = sum(not r.passed for r in results)
    if args.update:
        print(f"{len(results)} case(s): {failed} updated, {len(results) - failed} unchanged")
        return 1 if any(r.error for r in results) else 0
    print(f"{len(results)} case(s): {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


def cmd_record(args) -> int:
    """Write the case recorded from a stored session into --out."""
    from canvas2graph.server.backend.agent_tests.record import RecordError, record_session, write_case
    from canvas2graph.runtime.run.steps import ForkError
    try:
        files = asyncio.run(record_session(args.session, db=args.db, dsl=args.dsl, name=args.name))
    except (RecordError, ForkError) as e:
        raise UsageError(str(e))
    folder = write_case(files, args.out)
    turns = len(files["case.json"]["turns"])
    print(f"recorded session {args.session} ({turns} turn(s)) as {folder}; run it with: canvas2graph test {folder}",
          file=sys.stderr)
    return 0
