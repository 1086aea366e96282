#!/usr/bin/env python3
# Copied unchanged (apart from these three lines) from ../shared/parity/check.py, the checker that ships with the
# shared parity cases, so that a clone of this repository checks parity without ../shared; test_parity.py
# compares the copy and the copied cases with ../shared whenever it is there.
"""Replay parity cases through the canvas2graph CLI and compare its events with RAGFlow's.

Each case folder holds dsl.json, case.json and the expected traces (turnN.jsonl) that
RAGFlow's own engine produced for the same DSL, query, inputs and scripted model replies.

For every turn the checker runs, in one fresh session shared by the case's turns:

    <cli> run <case>/dsl.json --session <id> --db <tmp>/sessions.db \
        --llm-script <turn script> --format jsonl [--query <q>] [--inputs <inputs.json>]

and reads one JSON event per line from stdout. The script file uses the oracle's format
(see README.md). A turn's inputs resume a pending UserFillUp, or else go to Begin.

Levels, each including the ones before it:
  text   the messages (whitespace ignored), the user_inputs pause and how each turn ends
  nodes  every component's node_finished outputs and errors, and which nodes started
  order  the exact sequence of events (runs of message chunks count as one)

Usage: check.py [--cli CMD] [--level text|nodes|order] [--cases DIR] [--show] [CASE ...]
Exit status 0 when every selected case holds at the requested level.
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

EVENTS = {"workflow_started", "node_started", "node_finished", "message", "message_end",
          "user_inputs", "workflow_finished"}
TIMING_KEYS = {"created_at", "elapsed_time", "_created_time", "_elapsed_time"}
LEVELS = ["text", "nodes", "order"]
HERE = os.path.dirname(os.path.abspath(__file__))


def normalise(value, key=None):
    if isinstance(value, dict):
        return {k: normalise(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if key in TIMING_KEYS and (isinstance(value, (int, float)) or (isinstance(value, str) and value.startswith("<"))):
        return "<" + key + ">"
    if key == "sys.date" and isinstance(value, str):
        return "<sys.date>"
    return value


def squash(value):
    """Compare text without whitespace: RAGFlow drops spaces around references in some paths."""
    if isinstance(value, str):
        return re.sub(r"\s+", "", value)
    if isinstance(value, dict):
        return {k: squash(v) for k, v in value.items()}
    if isinstance(value, list):
        return [squash(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return float(value)
    return value


def read_events(lines):
    events, noise = [], []
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            noise.append(line)
            continue
        if isinstance(ev, dict) and ev.get("event") in EVENTS:
            events.append(normalise(ev))
        else:
            noise.append(line)
    return events, noise


def ending(events, raw_lines):
    if events and events[-1]["event"] == "user_inputs":
        return "paused"
    if any(e["event"] == "workflow_finished" for e in events):
        return "finished"
    return "stopped"


def texts(events):
    segments, cur = [], []
    for e in events:
        if e["event"] == "message":
            cur.append(str(e["data"].get("content") or ""))
        elif e["event"] == "message_end":
            segments.append(squash("".join(cur)))
            cur = []
    if cur:
        segments.append(squash("".join(cur)))
    return segments


def pause(events):
    for e in events:
        if e["event"] == "user_inputs":
            d = e["data"]
            return {"fields": sorted((d.get("inputs") or {}).keys()), "tips": squash(d.get("tips") or "")}
    return None


def finished_outputs(events):
    for e in events:
        if e["event"] == "workflow_finished":
            return squash(strip_internal(e["data"].get("outputs")))
    return None


def strip_internal(outputs):
    if not isinstance(outputs, dict):
        return outputs
    out = {}
    for k, v in outputs.items():
        if k in TIMING_KEYS:
            continue
        out[k] = bool(v) if k == "_ERROR" else v
    return out


def node_results(events):
    res = {}
    for e in events:
        if e["event"] == "node_finished":
            d = e["data"]
            res.setdefault(d.get("component_id"), []).append(
                {"outputs": squash(strip_internal(d.get("outputs"))), "error": bool(d.get("error"))})
    return res


def started(events):
    return sorted(e["data"].get("component_id") for e in events if e["event"] == "node_started")


def sequence(events):
    seq = []
    for e in events:
        item = e["event"] + (":" + str(e["data"].get("component_id")) if "component_id" in e["data"] else "")
        if item == "message" and seq and seq[-1] == "message":
            continue
        seq.append(item)
    return seq


def first_diff(a, b):
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return f"at {i}: expected {short(x)} got {short(y)}"
        return f"lengths differ: expected {len(a)} got {len(b)}"
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if a.get(k) != b.get(k):
                return f"{k}: expected {short(a.get(k))} got {short(b.get(k))}"
    return f"expected {short(a)} got {short(b)}"


def short(v, n=160):
    s = json.dumps(v, ensure_ascii=False, default=str)
    return s if len(s) <= n else s[:n] + "..."


def compare(expected, actual):
    """Return (level reached, reason for the first level missed)."""
    checks = [
        ("text", [("ending", ending(expected, None), ending(actual, None)),
                  ("messages", texts(expected), texts(actual)),
                  ("pause", pause(expected), pause(actual)),
                  ("workflow_finished.outputs", finished_outputs(expected), finished_outputs(actual))]),
        ("nodes", [("node_finished", node_results(expected), node_results(actual)),
                   ("node_started", started(expected), started(actual))]),
        ("order", [("sequence", sequence(expected), sequence(actual))]),
    ]
    reached = None
    for level, items in checks:
        for what, exp, act in items:
            if exp != act:
                return reached, f"{level}/{what}: {first_diff(exp, act)}"
        reached = level
    return reached, ""


def run_case(case_dir, cli, show):
    case = json.load(open(os.path.join(case_dir, "case.json"), encoding="utf-8"))
    name = os.path.basename(case_dir.rstrip("/"))
    results = []
    with tempfile.TemporaryDirectory(prefix="parity-") as tmp:
        session = "parity-" + name
        db = os.path.join(tmp, "sessions.db")
        for n, turn in enumerate(case["turns"], 1):
            script = os.path.join(tmp, f"script{n}.json")
            json.dump(turn["script"], open(script, "w", encoding="utf-8"), ensure_ascii=False)
            cmd = shlex.split(cli) + ["run", os.path.join(case_dir, "dsl.json"), "--session", session,
                                      "--db", db, "--llm-script", script, "--format", "jsonl"]
            if turn.get("query"):
                cmd += ["--query", turn["query"]]
            if turn.get("inputs"):
                inputs = os.path.join(tmp, f"inputs{n}.json")
                json.dump(turn["inputs"], open(inputs, "w", encoding="utf-8"), ensure_ascii=False)
                cmd += ["--inputs", inputs]
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
                out, err, code = proc.stdout, proc.stderr, proc.returncode
            except subprocess.TimeoutExpired as e:
                out, err, code = e.stdout or "", "timed out after 120 s", -1
            except FileNotFoundError as e:
                out, err, code = "", str(e), -1
            actual, noise = read_events(out.splitlines())
            expected, _ = read_events(open(os.path.join(case_dir, turn["expected"]), encoding="utf-8"))
            reached, reason = compare(expected, actual)
            if not actual and code != 0:
                reason = f"the CLI exited {code}: {(err.strip().splitlines() or [''])[-1][:200]}"
            results.append((n, reached, reason))
            if show:
                print(f"--- {name} turn {n}: {' '.join(cmd)}")
                for line in out.splitlines():
                    print("  " + line[:300])
                if err.strip():
                    print("  stderr: " + err.strip()[-600:])
    return name, results


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=os.environ.get("PARITY_CLI", "canvas2graph"))
    ap.add_argument("--level", choices=LEVELS, default="nodes")
    ap.add_argument("--cases", default=os.path.join(HERE, "cases"))
    ap.add_argument("--show", action="store_true", help="print each command and its output")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args(argv)
    names = args.names or sorted(d for d in os.listdir(args.cases) if os.path.isdir(os.path.join(args.cases, d)))
    want = LEVELS.index(args.level)
    counts = {lvl: 0 for lvl in LEVELS}
    failed = 0
    for name in names:
        case_name, results = run_case(os.path.join(args.cases, name), args.cli, args.show)
        worst = min((LEVELS.index(r) if r else -1) for _, r, _ in results)
        for i, lvl in enumerate(LEVELS):
            if worst >= i:
                counts[lvl] += 1
        ok = worst >= want
        failed += not ok
        label = LEVELS[worst] if worst >= 0 else "none"
        reasons = "; ".join(f"turn {n}: {why}" for n, r, why in results if why)
        print(f"{'PASS' if ok else 'FAIL'} {case_name:48s} reached={label:5s} {reasons}"[:400])
    total = len(names)
    print(f"cases={total} text={counts['text']} nodes={counts['nodes']} order={counts['order']} "
          f"failing_at_{args.level}={failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
