"""The registry of component families, as several threads see it at once."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

FIRST_COMPILES_AT_ONCE = """
import json, threading
from canvas2graph.compiler.canvas import diagnose
dsl = {"components": {
    "begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": ["LLM:A"]},
    "LLM:A": {"obj": {"component_name": "LLM", "params": {"llm_id": "m@OpenAI",
              "prompts": [{"role": "user", "content": "{sys.query}"}]}}, "downstream": ["Message:M"]},
    "Message:M": {"obj": {"component_name": "Message", "params": {"content": ["{LLM:A@content}"]}}, "downstream": []}}}
start = threading.Barrier(8)
problems = []
def check():
    start.wait()
    compiled, diags = diagnose(dsl)
    if compiled is None:
        problems.append([d.message for d in diags])
threads = [threading.Thread(target=check) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps(problems))
"""


def test_the_first_compiles_of_a_process_running_at_once_all_see_every_component():
    """A server's first requests compile in several threads while the families are still being imported;
    none may see half a registry ("unknown component_name 'LLM'")."""
    for _ in range(3):          # a fresh interpreter each time: the race is in the first load
        done = subprocess.run([sys.executable, "-c", FIRST_COMPILES_AT_ONCE], cwd=REPO, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip().splitlines()[-1] == "[]"
