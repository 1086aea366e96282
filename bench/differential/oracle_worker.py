"""RAGFlow's engine as a long-lived worker for the differential tester. Run with the oracle's Python
($ORACLE_HOME/venv/bin/python), never imported by canvas2graph: it imports RAGFlow through
`../shared/oracle/harness` (the path comes as the first argument).

Protocol: one JSON object per line on stdin, `{"dsl": {...}, "turns": [{"query", "inputs"?, "script"}]}`;
one JSON line per case on the descriptor that was stdout at start, `{"turns": [[event, ...], ...]}` or
`{"error": "..."}`. The turns share one session exactly as the parity cases' recorder runs them
(`run_cases.run_turns`): a later turn's inputs resume a pending UserFillUp, or else go to Begin.
Everything RAGFlow prints goes to stderr.
"""
import json
import logging
import os
import sys


def main() -> int:
    harness = sys.argv[1]
    sys.pycache_prefix = sys.pycache_prefix or os.path.join(sys.prefix, "pycache")   # nothing written in shared/
    sys.path.insert(0, harness)
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    logging.disable(logging.CRITICAL)
    from run_cases import run_turns
    from run_oracle import Oracle, load_dsl
    oracle = Oracle()
    out.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        try:
            results = run_turns(oracle, load_dsl(job["dsl"]), job["turns"])
            reply = {"turns": [r["events"] for r in results]}
        except Exception as e:          # the harness itself failed: say so, keep serving
            reply = {"error": f"{type(e).__name__}: {e}"}
        out.write(json.dumps(reply, ensure_ascii=False, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
