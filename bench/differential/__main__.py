"""Differential testing against RAGFlow's engine: generated DSLs through both engines, every difference shrunk.

    python -m bench.differential --n 200                  # 200 generated cases, seed 0
    python -m bench.differential --n 1000 --seed 7 --out /tmp/diff   # also writes each shrunk case there

Each case (a valid DSL and its turns, `bench/differential/generate.py`) runs through RAGFlow's own engine
(`../shared/oracle`, like `bench.ragflow`) and through canvas2graph, and the events are compared at the
parity checker's levels (`tests/parity/check.py`: text, nodes, order). The report counts the cases that
agree at each level and lists each kind of difference (its level, what differs, the component types) with
how many cases show it and the smallest DSL found that still shows it. Differences that a row of
docs/compatibility.md explains (`known.py`) are counted apart and not shrunk. With `--out`, each kind's shrunk
case is written as a parity case folder (`dsl.json`, `case.json` with the turns) ready for
`make_case.py --rerecord`. Exit status 0 when nothing differs that the document does not list, 1 otherwise,
2 when the oracle is missing.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from bench.differential.engines import Oracle, missing, run_canvas2graph
from bench.differential.generate import Case, cases
from bench.differential.known import documented, explain
from bench.differential.shrink import Difference, difference, shrink

LEVELS = ["none", "text", "nodes", "order"]


def generated(n: int, seed: int, max_steps: int) -> list[Case]:
    """`n` cases drawn by Hypothesis (reproducible from `seed`)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as with_seed
    drawn: list[Case] = []

    @with_seed(seed)
    @settings(max_examples=n, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(cases(max_steps=max_steps))
    def collect(case: Case) -> None:
        drawn.append(case)

    collect()
    return drawn[:n]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.differential", description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100, help="how many generated cases (default 100)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-steps", type=int, default=8, help="steps per DSL (each 1-4 components)")
    ap.add_argument("--out", metavar="DIR", help="write each kind of difference's shrunk case here")
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per case per engine")
    ap.add_argument("--json", metavar="PATH", help="also write the report as JSON")
    args = ap.parse_args(argv)
    reason = missing()
    if reason:
        print(f"bench.differential: {reason}", file=sys.stderr)
        return 2
    oracle = Oracle(args.timeout)
    t0 = time.monotonic()
    reached = {level: 0 for level in LEVELS}
    kinds: dict[str, dict] = {}
    failures: list[str] = []
    drawn = generated(args.n, args.seed, args.max_steps)

    def differs(dsl: dict, turns: list[dict]) -> Difference | None:
        return difference(documented(oracle.run(dsl, turns))[0], run_canvas2graph(dsl, turns, args.timeout))

    listed: dict[str, int] = {}
    listed_cases: set[int] = set()          # cases with a documented difference (a rewrite or a row)
    listed_levels: dict[str, int] = {}       # ...by the level they reached (nodes: they differ in order only)
    try:
        for i, case in enumerate(drawn):
            try:
                raw = oracle.run(case.dsl, case.turns)
                ours = run_canvas2graph(case.dsl, case.turns, args.timeout)
            except Exception as e:     # an engine failed or hung: reported, the run goes on
                failures.append(f"case {i}: {type(e).__name__}: {str(e)[:300]}")
                continue
            theirs, rewrites = documented(raw)        # documented differences in values, applied first
            found = difference(theirs, ours)
            if rewrites and difference(raw, ours) is not None:
                listed_cases.add(i)
                for name in rewrites:
                    listed[name] = listed.get(name, 0) + 1
            level = found.level if found else "order"
            for lv in LEVELS[1:LEVELS.index(level) + 1]:
                reached[lv] += 1
            if found is None:
                continue
            known = explain(found, case, theirs, ours)
            if known is not None:
                listed_cases.add(i)
                listed[known.name] = listed.get(known.name, 0) + 1
                listed_levels[found.level] = listed_levels.get(found.level, 0) + 1
                continue
            kind = kinds.setdefault(found.name, {"count": 0, "level": found.level, "first": i, "reason": found.reason,
                                                 "case": case})
            kind["count"] += 1
            print(f"[{i + 1}/{len(drawn)}] {found.level}: {found.reason[:200]}", file=sys.stderr)
        for name, kind in kinds.items():
            case = kind["case"]
            small = case.dsl if args.no_shrink else shrink(case.dsl, case.turns, name, differs)
            kind["dsl"], kind["turns"] = small, case.turns
    finally:
        oracle.close()
    report = _report(len(drawn), reached, kinds, listed, len(listed_cases), failures, time.monotonic() - t0)
    report.insert(1, "listed by the level they reached: " + ", ".join(f"{k}={v}" for k, v in sorted(listed_levels.items()))
                  + "; " + coverage(drawn))
    print("\n".join(report))
    if args.out:
        _write(Path(args.out), kinds)
    if args.json:
        Path(args.json).write_text(json.dumps({"cases": len(drawn), "reached": reached, "failures": failures,
                                               "listed": listed, "listed_cases": len(listed_cases),
                                               "listed_levels": listed_levels, "coverage": coverage(drawn), "kinds": [
            {"name": k, "count": v["count"], "level": v["level"], "reason": v["reason"], "dsl": v["dsl"], "turns": v["turns"]}
            for k, v in kinds.items()]}, ensure_ascii=False, indent=1), encoding="utf-8")
    return 1 if kinds or failures else 0     # listed differences alone are not a failure


def coverage(drawn: list[Case]) -> str:
    """How many cases hold each component type, a container inside another, several turns."""
    counts: dict[str, int] = {}
    for case in drawn:
        comps = case.dsl["components"]
        kinds = {e["obj"]["component_name"] for e in comps.values()}
        containers = {c for c, e in comps.items() if e["obj"]["component_name"] in ("Iteration", "Loop")}
        if any(comps[c].get("parent_id") in containers for c in containers):
            kinds.add("nested containers")
        if any(e["obj"]["params"].get("tools") for e in comps.values()):
            kinds.add("Agent with tools")
        if len(case.turns) > 1:
            kinds.add(f"{len(case.turns)} turns")
        for k in kinds:
            counts[k] = counts.get(k, 0) + 1
    return "cases holding: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))


def _report(total: int, reached: dict, kinds: dict, listed: dict, listed_cases: int, failures: list[str],
            seconds: float) -> list[str]:
    lines = [f"cases={total} agree: text={reached['text']} nodes={reached['nodes']} order={reached['order']} "
             f"listed in docs/compatibility.md={listed_cases} not listed={sum(k['count'] for k in kinds.values())} "
             f"engine failures={len(failures)} ({seconds:.0f} s)", ""]
    lines += [f"listed: {n} case(s): {name}" for name, n in sorted(listed.items(), key=lambda kv: -kv[1])]
    lines.append("")
    for name, kind in sorted(kinds.items(), key=lambda kv: -kv[1]["count"]):
        lines.append(f"## {kind['count']} case(s), reached {kind['level']}: {name}")
        lines.append(f"   first in case {kind['first']}: {kind['reason'][:300]}")
        lines.append("   shrunk DSL: " + json.dumps(kind["dsl"], ensure_ascii=False))
        lines.append("   turns: " + json.dumps(kind["turns"], ensure_ascii=False))
        lines.append("")
    lines += [f"engine failure: {f}" for f in failures]
    return lines


def _write(out: Path, kinds: dict) -> None:
    for n, (name, kind) in enumerate(sorted(kinds.items(), key=lambda kv: -kv[1]["count"]), 1):
        folder = out / f"diff_{n:02d}_{re.sub(r'[^a-z0-9]+', '_', name.lower()).strip('_')[:40]}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "dsl.json").write_text(json.dumps(kind["dsl"], ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        (folder / "case.json").write_text(json.dumps({"description": f"generated: {name}", "turns": kind["turns"]},
                                                     ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
