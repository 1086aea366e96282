"""`canvas2graph langgraph DSL... --out DIR`: a folder that LangGraph Server (`langgraph dev`, a deployment) serves.

    DIR/langgraph.json   graphs, dependencies
    DIR/agents.py        one module-level graph per DSL: canvas2graph.compile(DIR/dsl/<graph id>.json)
    DIR/dsl/*.json       the DSLs, as given

Each DSL becomes one graph; its id comes from the agent's title (a RAGFlow template or agent record
has one) or else its file name, reduced to letters, digits and underscores. The graphs are compiled
without a checkpointer (the server brings its own) and run with the context the environment gives
(`canvas2graph.runtime.services.environment`), as `canvas2graph serve` reads it. Every DSL is compiled before anything is
written, so a folder is never left half made; the DSLs' problems are reported as `compile` reports them.
"""
from __future__ import annotations

import json
import keyword
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from canvas2graph.types import UsageError

GRAPHS_MODULE = "agents.py"
DSL_FOLDER = "dsl"
RESERVED = {"canvas2graph", "Path", "DSL", "DEFAULT_LLM"}       # names agents.py uses itself


@dataclass
class Agent:
    graph_id: str
    source: Path
    text: bytes
    components: int


def agent_title(doc: Any) -> str:
    """The title a RAGFlow template, agent record or API envelope carries; "" for a bare DSL."""
    for _ in range(3):
        if not isinstance(doc, dict):
            return ""
        title = doc.get("title")
        if isinstance(title, str) and title.strip():
            return title.strip()
        doc = doc.get("data")
    return ""


def graph_id(name: str) -> str:
    """A LangGraph graph id that is also a Python name: ASCII letters, digits and underscores."""
    ident = re.sub(r"[^0-9A-Za-z]+", "_", name).strip("_").lower()
    if ident and ident[0].isdigit():
        ident = "agent_" + ident
    if keyword.iskeyword(ident) or ident in {r.lower() for r in RESERVED}:
        ident += "_agent"
    return ident


def _unique(ident: str, taken: set[str]) -> str:
    candidate, n = ident, 2
    while candidate in taken:
        candidate, n = f"{ident}_{n}", n + 1
    taken.add(candidate)
    return candidate


def read_agents(paths: list[str], default_llm: str | None) -> list[Agent] | None:
    """Compile every DSL; None when one does not compile (every problem of every file is printed)."""
    from canvas2graph.compiler.canvas import diagnose

    agents: list[Agent] = []
    taken: set[str] = set()
    failed = False
    for name in paths:
        path = Path(name)
        try:
            text = path.read_bytes()
        except OSError as e:
            raise UsageError(f"cannot read {name}: {e.strerror or e}")
        compiled, diagnostics = diagnose(text, default_llm=default_llm)
        if compiled is None:
            failed = True
            for d in diagnostics:
                print(f"{name}: {d}", file=sys.stderr)
            continue
        try:
            title = agent_title(json.loads(text))
        except ValueError:
            title = ""
        ident = _unique(graph_id(title) or graph_id(path.stem) or "agent", taken)
        agents.append(Agent(ident, path, text, len(compiled.plan.nodes)))
    return None if failed else agents


def langgraph_json(agents: list[Agent], out: Path) -> dict[str, Any]:
    """LangGraph Server's config: the graphs, and the packages their module needs (this folder and
    canvas2graph: its source checkout when it runs from one, else the installed distribution)."""
    project = Path(__file__).resolve().parents[2]
    if (project / "pyproject.toml").is_file():
        dependency = _relative(project, out)
    else:
        dependency = "canvas2graph"
    return {
        "dependencies": [".", dependency],
        "graphs": {a.graph_id: f"./{GRAPHS_MODULE}:{a.graph_id}" for a in agents},
        "python_version": f"{sys.version_info.major}.{sys.version_info.minor}",
    }


def _relative(path: Path, start: Path) -> str:
    import os
    return Path(os.path.relpath(path, start.resolve())).as_posix()


def graphs_module(agents: list[Agent], default_llm: str | None) -> str:
    lines = [
        '"""LangGraph Server entry points: RAGFlow agents compiled by canvas2graph (written by `canvas2graph langgraph`).',
        "",
        "Each graph is a LangGraph CompiledStateGraph without a checkpointer: the server brings its own. Its input",
        "is {query, inputs, files, user_id}, its output {answer, outputs}; node names are the canvas's component",
        "ids (':' becomes '.', the id itself is in each node's metadata). Runs get their models and services from",
        "the environment, as `canvas2graph serve` does: CANVAS2GRAPH_LLM_SCRIPT, CANVAS2GRAPH_MODELS, the",
        "providers' keys, CANVAS2GRAPH_RETRIEVAL, CANVAS2GRAPH_MCP_CONFIG, CANVAS2GRAPH_ALLOW_LOCAL_CODE, ...",
        "CANVAS2GRAPH_DEFAULT_LLM, the model of components without one, is read here, when the graphs compile.",
        '"""',
        "from pathlib import Path",
        "",
        "import canvas2graph",
        "",
        f'DSL = Path(__file__).resolve().parent / "{DSL_FOLDER}"',
    ]
    if default_llm:
        lines.append(f"DEFAULT_LLM = {default_llm!r}")
    lines.append("")
    option = ", default_llm=DEFAULT_LLM" if default_llm else ""
    for a in agents:
        lines.append(f"# {a.source.name}: {a.components} components")
        lines.append(f'{a.graph_id} = canvas2graph.compile(DSL / "{a.graph_id}.json"{option}, name="{a.graph_id}")')
    return "\n".join(lines) + "\n"


def write_folder(agents: list[Agent], out: Path, default_llm: str | None) -> None:
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a folder")
    (out / DSL_FOLDER).mkdir(parents=True, exist_ok=True)
    for a in agents:
        (out / DSL_FOLDER / f"{a.graph_id}.json").write_bytes(a.text)
    (out / GRAPHS_MODULE).write_text(graphs_module(agents, default_llm), encoding="utf-8")
    (out / "langgraph.json").write_text(json.dumps(langgraph_json(agents, out), indent=2) + "\n", encoding="utf-8")


def cmd_langgraph(args) -> int:
    agents = read_agents(args.files, args.default_llm)
    if agents is None:
        return 1                        # nothing written
    out = Path(args.out)
    write_folder(agents, out, args.default_llm)
    for a in agents:
        print(f"{a.source}: graph {a.graph_id!r} ({a.components} components)")
    print(f"wrote {out / 'langgraph.json'}; serve it with: cd {out} && langgraph dev")
    print("its models come from the environment: the providers' keys (OPENAI_API_KEY, ...) or CANVAS2GRAPH_MODELS; "
          f"offline, a script answers for every model: cd {out} && CANVAS2GRAPH_LLM_SCRIPT=/path/to/script.json "
          "langgraph dev")
    return 0
