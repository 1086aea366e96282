"""The long fuzz run, for a nightly job or before a release:

    python -m tests.fuzz --examples 100000 --runs 10000 [--http 2000] [--cli 500] [--seed N]

Same generators and properties as the CI tests (tests/fuzz/test_*.py), many more examples, and a
survey instead of a stop at the first failure: every failing example is counted by kind (crash,
hang, unencodable output) and cause, and saved as JSON under --failures (one file per cause) to
become a regression test. Prints the figures docs/robustness.md quotes; exits 1 when anything failed.
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from tests.fuzz import strategies as S
from tests.fuzz.properties import Hang, check_compile, check_run


class Survey:
    def __init__(self, name: str, failures: Path):
        self.name, self.failures = name, failures
        self.examples = 0
        self.outcomes: collections.Counter = collections.Counter()
        self.causes: collections.Counter = collections.Counter()
        self.kinds: collections.Counter = collections.Counter()
        self.slowest = (0.0, None)
        self.started = time.monotonic()

    def check(self, check: Callable[..., Any], *args: Any) -> None:
        self.examples += 1
        started = time.monotonic()
        try:
            self.outcomes[str(check(*args))] += 1
        except (Exception, Hang) as e:          # noqa: BLE001 - counting every failure is the point
            self._record(e, args)
        elapsed = time.monotonic() - started
        if elapsed > self.slowest[0]:
            self.slowest = (elapsed, args)

    def _record(self, error: BaseException, args: tuple) -> None:
        kind = ("hang" if isinstance(error, Hang) else
                "unencodable" if "cannot be encoded" in str(error) else "crash")
        frames = [f for f in traceback.extract_tb(error.__traceback__) if "/tests/" not in f.filename] or \
            traceback.extract_tb(error.__traceback__)
        where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
        cause = f"{kind}: {type(error).__name__} at {where}: {str(error)[:120]}"
        self.kinds[kind] += 1
        if cause not in self.causes:
            self.failures.mkdir(parents=True, exist_ok=True)
            path = self.failures / f"{self.name}-{len(self.causes) + 1}.json"
            path.write_text(json.dumps({"cause": cause, "args": args}, default=repr, ensure_ascii=True, indent=1))
        self.causes[cause] += 1

    def report(self) -> dict:
        return {"target": self.name, "examples": self.examples, "seconds": round(time.monotonic() - self.started, 1),
                "crashes": self.kinds["crash"], "hangs": self.kinds["hang"], "unencodable": self.kinds["unencodable"],
                "slowest_seconds": round(self.slowest[0], 3), "outcomes": dict(self.outcomes.most_common()),
                "causes": dict(self.causes.most_common())}


def _run(strategy: st.SearchStrategy, examples: int, test: Callable[..., None], random_seed: int) -> None:
    @seed(random_seed)
    @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def body(args):
        test(*args)

    body()


def compile_outcome(doc: Any) -> str:
    return "compiles" if check_compile(doc) is not None else "diagnosed"


def run_outcome(*args: Any) -> str:
    statuses = check_run(*args)
    return "does not compile" if statuses is None else "+".join(statuses)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n\n")[0])
    p.add_argument("--examples", type=int, default=10_000, help="DSL documents through diagnose() (default 10,000)")
    p.add_argument("--runs", type=int, default=1_000, help="one-turn runs of DSLs that compile (default 1,000)")
    p.add_argument("--http", type=int, default=0, help="requests to a real server (default 0: skipped)")
    p.add_argument("--cli", type=int, default=0, help="command lines run in-process (default 0: skipped)")
    p.add_argument("--seed", type=int, default=0, help="random seed, so a run can be repeated (default 0)")
    p.add_argument("--failures", type=Path, default=Path("fuzz-failures"),
                   help="folder for one reproducer per failure cause (default ./fuzz-failures)")
    p.add_argument("--report", type=Path, help="also write the figures as JSON to this file")
    args = p.parse_args(argv)

    reports = []
    if args.examples:
        survey = Survey("compile", args.failures)
        _run(st.tuples(st.one_of(S.documents(), S.texts_of())), args.examples,
             lambda doc: survey.check(compile_outcome, doc), args.seed)
        reports.append(survey.report())
        print(json.dumps(reports[-1], ensure_ascii=False), flush=True)
    if args.runs:
        survey = Survey("run", args.failures)
        compiled = [0]

        def one(doc, query, script, inputs):
            survey.check(run_outcome, doc, query, script, inputs)
        # only DSLs that compile count as runs: draw until `runs` of them have run
        while survey.examples - survey.outcomes.get("does not compile", 0) < args.runs:
            left = args.runs - (survey.examples - survey.outcomes.get("does not compile", 0))
            _run(st.tuples(S.mutants(mild=True), S.queries(), S.scripts(), S.form_inputs()), max(left * 2, 10), one,
                 args.seed + compiled[0])
            compiled[0] += 1
        report = survey.report()
        report["runs"] = survey.examples - survey.outcomes.get("does not compile", 0)
        reports.append(report)
        print(json.dumps(reports[-1], ensure_ascii=False), flush=True)
    if args.http:
        from tests.fuzz.http import survey_http
        reports.append(survey_http(args.http, args.seed, Survey("http", args.failures)))
        print(json.dumps(reports[-1], ensure_ascii=False), flush=True)
    if args.cli:
        from tests.fuzz.cli import survey_cli
        reports.append(survey_cli(args.cli, args.seed, Survey("cli", args.failures)))
        print(json.dumps(reports[-1], ensure_ascii=False), flush=True)
    if args.report:
        args.report.write_text(json.dumps(reports, ensure_ascii=False, indent=1))
    failed = sum(r["crashes"] + r["hangs"] + r["unencodable"] for r in reports)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
