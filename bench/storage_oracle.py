"""RAGFlow's side of `bench.storage`, run by the oracle's Python (`../shared/oracle`), not canvas2graph's.

    $ORACLE_PY bench/storage_oracle.py SPEC.json    # prints {"linear": {turns: bytes}, "iteration": {items: bytes}}

What RAGFlow stores for a conversation is one string, `str(canvas)` (the oracle's `--state-out`), rewritten
after every turn; its length after N turns is what it keeps. SPEC: {"harness", "linear_dsl", "iteration_dsl",
"turns": [...], "items": [...], "question", "answer"}.
"""
from __future__ import annotations

import json
import sys


def main(spec_path: str) -> None:
    spec = json.load(open(spec_path))
    sys.path.insert(0, spec["harness"])
    from run_oracle import Oracle        # the oracle harness: RAGFlow's Canvas, offline
    oracle = Oracle()
    linear = json.load(open(spec["linear_dsl"]))
    out: dict = {"linear": {}, "iteration": {}}
    wanted, state, turn = set(spec["turns"]), None, 0
    while turn < max(spec["turns"], default=0):
        turn += 1
        _, state, _ = oracle.run(json.loads(state) if state else linear, query=spec["question"] % turn,
                                 script={"auto_reply": spec["answer"]}, cont=state is not None)
        if turn in wanted:
            out["linear"][turn] = len(state.encode())
    iteration = json.load(open(spec["iteration_dsl"]))
    for n in spec["items"]:
        query = ",".join(f"item{i}" for i in range(n))
        _, state, _ = oracle.run(iteration, query=query, script={"auto_reply": "Three words here."})
        out["iteration"][n] = len(state.encode())
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
