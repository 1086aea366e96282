"""ragflow-sdk 0.27.3 for the tests that drive the server with it: it needs Python 3.13, so it runs in a virtual
environment of its own, made by the `sdk027_python` fixture with the first Python 3.13 found and cached under the
temp folder between runs. Under CI=true a missing SDK or Python 3.13 fails the test; elsewhere it skips, saying why."""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

SDK_NEW = "0.27.3"


def unavailable(message: str):
    if os.environ.get("CI") == "true":
        pytest.fail(message + " - CI must run the ragflow-sdk tests")
    pytest.skip(message)


def _python313() -> str | None:
    candidates = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.13*/bin/python3.13")))
    candidates += [p for p in (shutil.which("python3.13"),) if p]
    for candidate in candidates:
        probe = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 13))"],
                               capture_output=True, text=True)
        if probe.returncode == 0 and probe.stdout.strip() == "True":
            return candidate
    return None


@pytest.fixture(scope="module")
def sdk027_python() -> str:
    base = _python313()
    if base is None:
        unavailable("Python 3.13 is not installed (ragflow-sdk 0.27.3 needs it)")
    venv = Path(tempfile.gettempdir()) / "canvas2graph-test-venvs" / f"ragflow-sdk-{SDK_NEW}"
    python = venv / "bin" / "python"
    check = [str(python), "-c", f"import importlib.metadata as m; assert m.version('ragflow-sdk') == '{SDK_NEW}'"]
    if not python.exists() or subprocess.run(check, capture_output=True).returncode != 0:
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([base, "-m", "venv", str(venv)], check=True, capture_output=True)
        installed = subprocess.run([str(python), "-m", "pip", "install", "-q", f"ragflow-sdk=={SDK_NEW}"],
                                   capture_output=True, text=True, timeout=600)
        if installed.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            unavailable(f"cannot install ragflow-sdk {SDK_NEW}: {installed.stderr.strip()[-500:]}")
    return str(python)


