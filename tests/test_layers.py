"""The layers import one way, and each command loads only what it runs.

The data flows DSL -> plan -> graph -> events, and the imports follow it: `canvas2graph.types` sits
under everything, the compiler reads the node families it plans, the runtime runs what the compiler
built, the server serves the runtime. A cycle between modules of two of these packages would tie
them back together; these tests read every import statement (function-level ones included, type-only
ones not) and fail on one.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("canvas2graph", "compiler", "nodes", "runtime", "server")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imported(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    names: set[str] = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        if _is_type_checking(node):
            stack.extend(node.orelse)           # only the `else` of `if TYPE_CHECKING:` runs
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
        stack.extend(ast.iter_child_nodes(node))
    return names


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports; importing a module also runs its packages' __init__."""
    modules = _modules()

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets = {known(t) for t in _imported(tree, name, path.name == "__init__.py")}
        parent = name.rpartition(".")[0]
        while parent:
            targets.add(parent)
            parent = parent.rpartition(".")[0]
        graph[name] = {t for t in targets if t and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_crosses_a_layer():
    crossing = [c for c in cycles(import_graph()) if len({m.split(".")[0] for m in c}) > 1]
    assert crossing == [], "modules of different layers import each other: " + "; ".join(" <-> ".join(c) for c in crossing)


def test_the_types_module_imports_nothing_of_the_project():
    assert import_graph()["canvas2graph.types"] <= {"canvas2graph"}


def test_the_compiler_does_not_import_the_server():
    graph = import_graph()
    for module, targets in graph.items():
        if module.split(".")[0] in ("compiler", "nodes"):
            assert not {t for t in targets if t.startswith("server")}, module


def _loaded_after(code: str) -> set[str]:
    """Top-level packages in sys.modules after running `code` in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(done.stdout.splitlines()[-1].split())     # the last line: what `code` printed comes before


def test_help_loads_neither_langgraph_nor_the_server():
    loaded = _loaded_after("import runtime.cli\ntry:\n    runtime.cli.main(['--help'])\nexcept SystemExit:\n    pass")
    assert not loaded & {"langgraph", "langchain_core", "fastapi", "uvicorn", "pydantic"}


def test_run_does_not_load_the_server(tmp_path):
    dsl = tmp_path / "dsl.json"
    dsl.write_text('{"components": {"begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": ["Message:A"]},'
                   ' "Message:A": {"obj": {"component_name": "Message", "params": {"content": ["hi"]}}, "downstream": []}}}')
    loaded = _loaded_after(f"import runtime.cli\nassert runtime.cli.main(['run', {str(dsl)!r}, '--db', {str(tmp_path / 's.db')!r},"
                           " '--format', 'jsonl', '--query', 'hi']) == 0")
    assert "langgraph" in loaded
    assert not loaded & {"fastapi", "uvicorn", "starlette"}


def test_compile_checks_every_template_without_loading_langgraph_or_a_network_client():
    """`canvas2graph compile` loads every component to check a DSL, and runs none of them: LangGraph,
    LangChain, the HTTP and HTML libraries are imported where a component runs, not where it is declared."""
    templates = sorted((REPO / "canvas2graph" / "templates").rglob("*.json"))
    assert templates
    code = "import runtime.cli\n" + "\n".join(
        f"assert runtime.cli.main(['compile', {str(t)!r}, '--default-llm', 'm@OpenAI']) in (0, 1)" for t in templates)
    loaded = _loaded_after("import contextlib, io\nwith contextlib.redirect_stdout(io.StringIO()):\n    "
                           + code.replace("\n", "\n    "))
    assert not loaded & {"langgraph", "langchain_core", "langsmith", "httpx", "bs4", "fastapi", "markdown_it"}
