"""Record what RAGFlow's engine sends its model for each case here (run with the oracle's Python).

    ORACLE_PY=${ORACLE_HOME:-$HOME/.cache/ragflow-oracle}/venv/bin/python
    $ORACLE_PY tests/parity/prompts/record.py            # every case in cases/, or name some

A case is `{"description", "dsl", "query", "sys_files", "script"}`. `sys_files` is the turn's `sys.files`
as RAGFlow's canvas holds it once parsed (a text per document, a data URI per image): the oracle cannot
take an upload (`FileService` needs RAGFlow's database), so the case starts from a saved canvas whose
globals already hold them (a `--continue` run: no reset). What the model was sent goes to `recorded`:
each call's component and messages, as the oracle's `--llm-log` lists them; `thoughts` keeps what each
component's `node_started` showed (RAGFlow's thoughts start from the last message sent).
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
HARNESS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))), "..", "shared", "oracle", "harness")
sys.path.insert(0, os.path.abspath(os.environ.get("ORACLE_HARNESS", HARNESS)))
sys.pycache_prefix = sys.pycache_prefix or os.path.join(sys.prefix, "pycache")
from run_oracle import Oracle  # noqa: E402


def record(oracle, path):
    with open(path, encoding="utf-8") as f:
        case = json.load(f)
    dsl = {**case["dsl"], "history": [], "path": [], "retrieval": [],
           "globals": {"sys.query": "", "sys.user_id": "", "sys.conversation_turns": 0,
                       "sys.files": case["sys_files"], "sys.history": []}}
    events, _, _ = oracle.run(dsl, query=case["query"], script=case["script"], cont=True)
    finished = [e for e in events if e["event"] == "workflow_finished"]
    assert finished and not any(e["event"] == "node_finished" and e["data"].get("error") for e in events), events
    calls = oracle.fake_llm.SCRIPT.calls
    case["recorded"] = [{"component_id": c["component_id"], "messages": c["messages"]} for c in calls]
    case["thoughts"] = {e["data"]["component_id"]: e["data"]["thoughts"] for e in events
                        if e["event"] == "node_started" and e["data"].get("thoughts")}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(case, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{os.path.basename(path)}: {len(calls)} model call(s)")


def main(names):
    oracle = Oracle()
    folder = os.path.join(HERE, "cases")
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json") and (not names or name[:-5] in names):
            record(oracle, os.path.join(folder, name))


if __name__ == "__main__":
    main(sys.argv[1:])
