"""The layers import one way, the wheel installs one package, and each command loads only what it runs.

The data flows DSL -> plan -> graph -> run -> events -> HTTP and command line, and so do the imports:
every module has a rank (`RANKS`, by the folder or subpackage it sits in) and imports only modules of
its own rank or lower. Every import statement counts: module-level, function-level and type-only ones,
and the `"module:function"` strings the command line dispatches on. A package's `__init__` runs
whenever one of its modules is imported, so it may import nothing above its lowest module.
"""
from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# The installed package `canvas2graph` and the folders the wheel maps into it (pyproject.toml's package-dir).
FOLDERS = {"canvas2graph": "canvas2graph", "canvas2graph.compiler": "compiler", "canvas2graph.nodes": "nodes",
           "canvas2graph.runtime": "runtime", "canvas2graph.server": "server"}

# Lowest first. A module takes the rank of the longest prefix of its name listed here.
RANKS = {
    "canvas2graph.types": 0,                # the errors and types every layer shares
    "canvas2graph.text": 0,
    "canvas2graph.compiler.dsl": 1,         # the DSL's language: references, entries, diagnostics, loading
    "canvas2graph.runtime": 2,              # (the package's own __init__, which imports nothing)
    "canvas2graph.runtime.graph": 2,        # the graph kernel: state channels, values, turn start and end, forms
    "canvas2graph.runtime.services": 3,     # what nodes reach: models, sandbox, retrieval, MCP, files
    "canvas2graph.nodes": 4,                # one module (or folder) per component family
    "canvas2graph.compiler": 5,             # plan, check, build, export
    "canvas2graph.runtime.run": 6,          # the runner: events, step history, checkpointers, ingestion runs
    "canvas2graph.server.backend": 7,       # hosted agents: store, versions, conversations, webhooks
    "canvas2graph.server": 8,               # HTTP: RAGFlow's API, the protocols, the UI
    "canvas2graph": 9,                      # the public facade (lazy: its __init__ imports nothing)
    "canvas2graph.api": 9,
    "canvas2graph.cli": 10,                 # the command line
    "canvas2graph.__main__": 10,            # `python -m canvas2graph`
    "canvas2graph.eject": 11,               # what ejected modules import: their graph, run by the command line
}

DISPATCH = re.compile(r"^(canvas2graph(?:\.\w+)+):\w+$")     # "module:function", the CLI's lazy commands


def modules() -> dict[str, Path]:
    found = {}
    for package, folder in FOLDERS.items():
        for path in (REPO / folder).rglob("*.py"):
            parts = path.relative_to(REPO / folder).with_suffix("").parts
            if "node_modules" in parts or (package == "canvas2graph" and parts[0] in ("compiler", "nodes", "runtime", "server")):
                continue
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            found[".".join((package, *parts))] = path
    return found


def rank(module: str) -> int:
    name = module
    while name not in RANKS:
        if "." not in name:
            raise KeyError(f"{module} has no rank: add its folder to RANKS")
        name = name.rpartition(".")[0]
    return RANKS[name]


def imports(source: str, module: str, is_package: bool, eager_only: bool = False) -> set[str]:
    """The names a module imports: every statement (function-level and type-only too), and dispatch strings.
    With `eager_only`, only what runs when the module is imported (module level, outside TYPE_CHECKING)."""
    names: set[str] = set()
    stack: list[ast.AST] = [ast.parse(source)]
    while stack:
        node = stack.pop()
        if eager_only and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if eager_only and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = module if is_package else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    parent = parent.rpartition(".")[0]
                base = f"{parent}.{base}" if base else parent
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)
        elif not eager_only and isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = DISPATCH.match(node.value)
            if match:
                names.add(match.group(1))
        stack.extend(ast.iter_child_nodes(node))
    return names


def import_graph(sources: dict[str, tuple[str, bool]], eager_only: bool = False) -> dict[str, set[str]]:
    """module -> the project modules it imports (a name resolves to its longest known module prefix)."""
    def known(name: str) -> str | None:
        while name and name not in sources:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, (source, is_package) in sources.items():
        targets = {known(t) for t in imports(source, name, is_package, eager_only) if t.startswith("canvas2graph")}
        graph[name] = {t for t in targets if t and t != name}
    return graph


def upward_imports(sources: dict[str, tuple[str, bool]]) -> list[str]:
    """Every import of a higher rank, and every package __init__ that eagerly imports above its lowest module."""
    found = [f"{m} (rank {rank(m)}) imports {t} (rank {rank(t)})"
             for m, targets in import_graph(sources).items() for t in sorted(targets) if rank(t) > rank(m)]
    eager = import_graph(sources, eager_only=True)
    for package in (m for m, (_, is_package) in sources.items() if is_package):
        targets = eager[package]
        lowest = min(rank(m) for m in sources if m == package or m.startswith(package + "."))
        found += [f"{package}/__init__ runs when its rank-{lowest} modules load, and imports {t} (rank {rank(t)})"
                  for t in sorted(targets) if rank(t) > lowest]
    return found


def project_sources() -> dict[str, tuple[str, bool]]:
    return {m: (p.read_text(encoding="utf-8"), p.name == "__init__.py") for m, p in modules().items()}


def test_every_module_has_a_rank():
    assert [m for m in modules() if not _ranked(m)] == []


def _ranked(module: str) -> bool:
    try:
        rank(module)
    except KeyError:
        return False
    return True


def test_every_import_runs_downward():
    assert upward_imports(project_sources()) == []


@pytest.mark.parametrize("statement", [
    "from canvas2graph.server.app import create_app",                  # module level
    "def f():\n    from canvas2graph.server import app",                # inside a function
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from canvas2graph.runtime.run.runner import Runner",
    "COMMAND = 'canvas2graph.cli:main'",                           # a dispatch string
])
def test_a_planted_upward_import_is_found(statement):
    sources = project_sources()
    source, is_package = sources["canvas2graph.nodes.llm"]
    sources["canvas2graph.nodes.llm"] = (source + "\n" + statement + "\n", is_package)
    assert any(line.startswith("canvas2graph.nodes.llm (rank 4) imports") for line in upward_imports(sources))


def test_a_package_init_that_loads_its_upper_modules_is_found():
    sources = project_sources()
    sources["canvas2graph.compiler"] = ("from canvas2graph.compiler.canvas import compile_dsl\n", True)
    assert any(line.startswith("canvas2graph.compiler/__init__") for line in upward_imports(sources))


def test_no_module_over_600_lines_and_no_function_over_80():
    too_long = []
    paths = list(modules().values()) + list((REPO / "bench").rglob("*.py"))
    for path in paths:
        text = path.read_text(encoding="utf-8")
        lines = text.count("\n") + 1
        if lines > 600:
            too_long.append(f"{path.relative_to(REPO)}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 80:
                too_long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert too_long == []


def test_the_wheel_installs_one_package(tmp_path):
    """`pip install .` puts exactly `canvas2graph` into site-packages: no `compiler`, `nodes`, `runtime`
    or `server` beside it to clash with another distribution's."""
    source = tmp_path / "source"         # a copy: setuptools builds in the tree, and a stale build/ would ship
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    for name in listed.stdout.splitlines():
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(tmp_path), str(source)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("canvas2graph-*.whl")
    site = tmp_path / "site-packages"         # what `pip install` puts into a fresh environment's site-packages
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site),
                                str(wheel)], capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr
    assert {p.name for p in site.iterdir() if not p.name.endswith(".dist-info") and p.name != "bin"} == {"canvas2graph"}
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    packaged = {n.rpartition("/")[0].replace("/", ".") for n in names if n.endswith("/__init__.py")}
    assert packaged == {m for m, p in modules().items() if p.name == "__init__.py"}, "pyproject's package list is stale"
    for data in ("canvas2graph/server/ui/static/index.html", "canvas2graph/runtime/services/sandbox/inside/runner.js",
                 "canvas2graph/runtime/run/ingest/data/NOTICE"):
        assert any(n == data for n in names) or any(n.startswith(data.rpartition("/")[0]) for n in names), data


def _loaded_after(code: str) -> set[str]:
    """Top-level packages and canvas2graph's layers in sys.modules after running `code` in a fresh interpreter."""
    report = "\nimport sys\nprint(' '.join(sorted({m.split('.')[0] for m in sys.modules} | " \
             "{'.'.join(m.split('.')[:3]) for m in sys.modules if m.startswith('canvas2graph.')})))"
    done = subprocess.run([sys.executable, "-c", code + report], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(done.stdout.splitlines()[-1].split())     # the last line: what `code` printed comes before


def test_help_loads_neither_langgraph_nor_the_server():
    loaded = _loaded_after("from canvas2graph.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass")
    assert not loaded & {"langgraph", "langchain_core", "fastapi", "uvicorn", "pydantic", "canvas2graph.server"}


def test_run_does_not_load_the_server(tmp_path):
    dsl = tmp_path / "dsl.json"
    dsl.write_text('{"components": {"begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": ["Message:A"]},'
                   ' "Message:A": {"obj": {"component_name": "Message", "params": {"content": ["hi"]}}, "downstream": []}}}')
    loaded = _loaded_after(f"from canvas2graph.cli import main\nassert main(['run', {str(dsl)!r}, '--db', {str(tmp_path / 's.db')!r},"
                           " '--format', 'jsonl', '--query', 'hi']) == 0")
    assert "langgraph" in loaded
    assert not loaded & {"fastapi", "uvicorn", "starlette", "canvas2graph.server"}


def test_compile_checks_every_template_without_loading_langgraph_or_a_network_client():
    """`canvas2graph compile` loads every component to check a DSL, and runs none of them: LangGraph,
    LangChain, the HTTP and HTML libraries are imported where a component runs, not where it is declared."""
    templates = sorted((REPO / "canvas2graph" / "templates").rglob("*.json"))
    assert templates
    code = "from canvas2graph.cli import main\n" + "\n".join(
        f"assert main(['compile', {str(t)!r}, '--default-llm', 'm@OpenAI']) in (0, 1)" for t in templates)
    loaded = _loaded_after("import contextlib, io\nwith contextlib.redirect_stdout(io.StringIO()):\n    "
                           + code.replace("\n", "\n    "))
    assert not loaded & {"langgraph", "langchain_core", "langsmith", "httpx", "bs4", "fastapi", "markdown_it"}
