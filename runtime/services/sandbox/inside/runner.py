"""CodeExec's Python runner: loads the script, calls `main(**arguments)` and reports what it returned.

`python -I -B runner.py CODE ARGUMENTS REPORT_FD`: the value goes to REPORT_FD as one JSON line
`{"result": {"present": true, "value": ...}}`. It runs as the script's own process (inside the sandbox
when there is one) and imports nothing but the standard library and what the script imports.
"""
import importlib.util
import json
import os
import sys


def fail(message):
    sys.stderr.write(message + "\n")
    sys.exit(1)


code_path, args_path, report_fd = sys.argv[1], sys.argv[2], int(sys.argv[3])
del sys.argv[1:]
with open(args_path, encoding="utf-8") as f:
    arguments = json.load(f)
report = os.fdopen(report_fd, "w", encoding="utf-8")
spec = importlib.util.spec_from_file_location("main", code_path)
module = importlib.util.module_from_spec(spec)
sys.modules["main"] = module
spec.loader.exec_module(module)
entry = getattr(module, "main", None)
if not callable(entry):
    fail("The script defines no function named main(); CodeExec calls main(**arguments) and uses its return value.")
value = entry(**arguments)
try:
    text = json.dumps({"result": {"present": True, "value": value}}, ensure_ascii=False)
except (TypeError, ValueError) as e:
    fail(f"main() returned a value that cannot be written as JSON: {e}")
report.write(text + "\n")
report.flush()
