"""Shared test helpers.

Tests that read `../shared` (RAGFlow's recorded traces, templates) run in CI and fail there when it is
missing; in a user's clone without it they skip, saying why. So do the tests that run CodeExec
scripts locally, which need bubblewrap (`need_sandbox()`, the `sandboxed` fixture).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def shared_dir() -> Path:
    """`../shared` beside the checkout, or skip (fail under CI=true) when it is absent."""
    path = REPO.parent / "shared"
    if not path.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{path} is missing: CI must run with shared/ beside the checkout")
        pytest.skip(f"{path} is absent: the RAGFlow reference material lives outside this repository")
    return path


def shared_json_params(*subdirs: str) -> list:
    """`pytest.param`s for every JSON file in `../shared/ragflow/<subdir>`, safe at collection time.

    When the folder is absent it yields a single `None` param; the test passes it to
    `require_shared_file`, which skips (or fails under CI=true) through `shared_dir()`.
    """
    base = REPO.parent / "shared" / "ragflow"
    files = sorted(p for sub in subdirs for p in (base / sub).glob("*.json")) if base.is_dir() else []
    if not files:
        return [pytest.param(None, id="shared-absent")]
    return [pytest.param(p, id=f"{p.parent.name}/{p.name}") for p in files]


def require_shared_file(path: Path | None) -> Path:
    if path is None:
        shared_dir()
        pytest.fail("../shared/ragflow holds no template or example JSON files")
    return path


def require_graphviz() -> str:
    """The path of Graphviz's `dot`, or skip (fail under CI=true, where .ci/run installs it)."""
    import shutil
    dot = shutil.which("dot")
    if dot is None:
        if os.environ.get("CI") == "true":
            pytest.fail("Graphviz's `dot` is missing: .ci/run installs Debian's graphviz package")
        pytest.skip("Graphviz's `dot` is not installed (apt-get install graphviz): pictures cannot be drawn")
    return dot


def need_sandbox() -> None:
    """Skip (fail under CI=true) when bubblewrap cannot run scripts here: CodeExec's local runs need it."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from canvas2graph.runtime.services.sandbox import SandboxUnusable
    from canvas2graph.runtime.services.sandbox.bubblewrap import find_bubblewrap
    probe = find_bubblewrap(os.environ.get("CANVAS2GRAPH_BWRAP") or "bwrap")
    try:
        with ThreadPoolExecutor(1) as pool:          # callable from inside a running event loop too
            pool.submit(asyncio.run, probe).result()
    except SandboxUnusable as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run CodeExec in its sandbox: {e}")
        pytest.skip(f"no working sandbox for local code: {e}")


@pytest.fixture
def sandboxed() -> None:
    need_sandbox()


def cpn(component_name: str, params: dict | None = None, downstream: list | None = None, **entry) -> dict:
    """One component entry as RAGFlow stores it: `{"obj": {component_name, params}, "downstream", ...}`."""
    return {"obj": {"component_name": component_name, "params": params or {}}, "downstream": downstream or [], **entry}


def dsl(**components: dict) -> dict:
    """A bare DSL: a minimal Begin (leading to the first component given) plus `components`.

    Ids contain ':', so pass them as `dsl(**{"Message:A": cpn("Message", {...})})`. A `begin` key
    replaces the default Begin.
    """
    comps = {"begin": cpn("Begin", downstream=[c for c in components if c != "begin"][:1])}
    comps.update(components)
    return {"components": comps}


# Checkpointer fixtures (`checkpointer_url`, `durable_url`): one test suite against every checkpointer.
from tests.runtime.checkpointers import checkpointer_url, durable_url  # noqa: E402,F401

