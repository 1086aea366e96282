"""Ingestion pipelines: RAGFlow's shipped pipelines compile or say what they need, a folder of mixed
documents is ingested into the embedded store where an agent's Retrieval finds it, unchanged files are
skipped, a killed file resumes from its last finished component, and the first error stops a file."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from canvas2graph.compiler.canvas import diagnose
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from canvas2graph.runtime.services.environment import RunEnvironment, RunSettings
from canvas2graph.runtime.run.ingest.run import Ingestor, expand
from canvas2graph.runtime.services.retrieval import RetrievalRequest
from canvas2graph.runtime.services.retrieval.embedded import EmbeddedBackend
from canvas2graph.runtime.services.retrieval.indexing import doc_id_for
from tests.conftest import REPO
from tests import forkserver

HERE = Path(__file__).parent
SHIPPED = sorted((HERE / "ragflow_pipelines").glob("*.json"))
PIPELINE = REPO / "fixtures" / "kb" / "pipeline.json"


def cli(*args: str, env_config: Path | None = None) -> subprocess.CompletedProcess:
    """The command line; `env_config` is a retrieval config file ($CANVAS2GRAPH_RETRIEVAL_CONFIG)."""
    env = {**os.environ, **({"CANVAS2GRAPH_RETRIEVAL_CONFIG": str(env_config)} if env_config else {})}
    return subprocess.run([*forkserver.python(), "-m", "canvas2graph.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env=env)


def mixed_folder(root: Path) -> Path:
    """Markdown, text, HTML (the demo's documents), a DOCX with a table and a two-page PDF."""
    import docx
    from reportlab.pdfgen import canvas
    docs = root / "docs"
    shutil.copytree(REPO / "fixtures" / "kb" / "docs", docs)
    d = docx.Document()
    d.add_heading("Exchanges", 1)
    d.add_paragraph("Shoes can be exchanged for another size within 60 days.")
    table = d.add_table(rows=2, cols=2)
    for (r, c), text in {(0, 0): "Item", (0, 1): "Days", (1, 0): "Shoes", (1, 1): "60"}.items():
        table.cell(r, c).text = text
    d.save(docs / "exchanges.docx")
    pdf = canvas.Canvas(str(docs / "blender.pdf"))
    pdf.drawString(72, 720, "The blender has three speeds and a pulse button.")
    pdf.showPage()
    pdf.drawString(72, 720, "Descale the kettle monthly with citric acid.")
    pdf.save()
    return docs


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_every_shipped_ragflow_pipeline_compiles_or_names_what_it_needs(path):
    compiled, diags = diagnose(path.read_bytes(), default_llm="gpt-4o@OpenAI")
    errors = [d for d in diags if d.severity == "error"]
    if compiled is None:         # only what canvas2graph does not run yet stops it, and it says which
        assert errors and all(d.code == "unsupported" and ("not run by canvas2graph yet" in d.message
                                                          or "give them with params.compilation_templates" in d.message)
                              for d in errors)
    else:
        assert compiled.kind == "pipeline"
    needs = {d.field: d.message for d in diags if d.code == "needs-service"}
    pdf = next((m for f, m in needs.items() if f.endswith(".pdf")), "")
    assert "deepdoc" in pdf.lower() and "plain_text" in pdf      # the method, and what reads PDFs instead
    assert not any(f.endswith((".markdown", ".docx", ".html", ".text&code")) for f in needs)


def test_an_agent_canvas_still_reports_pipeline_components_as_belonging_to_ingest():
    doc = {"components": {"begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": ["Parser:A"]},
                          "Parser:A": {"obj": {"component_name": "Parser", "params": {}}, "downstream": []}}}
    _, diags = diagnose(doc)
    assert [(d.code, d.component_id) for d in diags] == [("unsupported", "Parser:A")]
    assert "canvas2graph ingest" in diags[0].message


def test_a_branching_pipeline_and_an_agent_component_in_a_pipeline_are_errors():
    doc = {"components": {
        "File": {"obj": {"component_name": "File", "params": {}}, "downstream": ["TokenChunker:A", "TokenChunker:B"]},
        "TokenChunker:A": {"obj": {"component_name": "TokenChunker", "params": {}}, "downstream": ["Message:M"]},
        "TokenChunker:B": {"obj": {"component_name": "TokenChunker", "params": {"chunk_token_size": 0}}, "downstream": []},
        "Message:M": {"obj": {"component_name": "Message", "params": {}}, "downstream": []}}}
    _, diags = diagnose(doc)
    found = {(d.code, d.component_id, d.field) for d in diags if d.severity == "error"}
    assert ("branching-pipeline", "File", "downstream") in found
    assert ("unsupported", "Message:M", "obj.component_name") in found
    assert ("invalid-param", "TokenChunker:B", "params.chunk_token_size") in found


def test_a_compiler_without_its_templates_is_an_error_naming_its_group_and_how_to_give_them(monkeypatch):
    monkeypatch.delenv("CANVAS2GRAPH_COMPILER_TEMPLATES", raising=False)
    doc = {"components": {
        "File": {"obj": {"component_name": "File", "params": {}}, "downstream": ["Compiler:K"]},
        "Compiler:K": {"obj": {"component_name": "Compiler", "params": {"compilation_template_group_id": "g-42"}},
                       "downstream": []}}}
    compiled, diags = diagnose(doc)
    assert compiled is None
    assert [(d.code, d.component_id, d.field) for d in diags] == [("unsupported", "Compiler:K", "obj.component_name")]
    assert "compilation template groups" in diags[0].message
    # the group it names, where its templates are, how to give them here, and what to do instead
    assert "template group g-42" in diags[0].message and "RAGFlow's database" in diags[0].message
    assert "params.compilation_templates" in diags[0].message and "--compiler-templates FILE" in diags[0].message
    assert "remove it to ingest with the rest of the pipeline" in diags[0].message


def test_a_mixed_folder_is_ingested_and_an_agents_retrieval_answers_from_it(tmp_path):
    docs = mixed_folder(tmp_path)
    db = str(tmp_path / "sessions.db")
    first = cli("ingest", str(PIPELINE), str(docs), "--kb", "support-kb", "--db", db)
    assert first.returncode == 0, first.stderr
    assert "5 file(s) ingested" in first.stdout and "0 failed" in first.stdout
    again = cli("ingest", str(PIPELINE), str(docs), "--kb", "support-kb", "--db", db)
    assert "0 file(s) ingested (0 chunks), 5 unchanged" in again.stdout

    from canvas2graph.runtime.services.retrieval.tokenizer import get_tokenizer
    get_tokenizer()             # loaded before the timed retrieval (a second or more on a busy machine)
    store = EmbeddedBackend(tmp_path / "retrieval.db")
    found = asyncio.run(store.retrieve(RetrievalRequest("how long can shoes be exchanged", ["support-kb"])))
    top = found.chunks[0]
    assert top["docnm_kwd"] == "exchanges.docx" and "60 days" in top["content_with_weight"]
    pdf = asyncio.run(store.retrieve(RetrievalRequest("descale the kettle", ["support-kb"])))
    assert pdf.chunks[0]["docnm_kwd"] == "blender.pdf"
    store.close()

    config = tmp_path / "retrieval.toml"         # the first retrieval loads the tokenizer: slow on a busy machine
    config.write_text("timeout = 120\n")
    run = cli("run", "fixtures/kb/kb_answer.json", "--llm-script", "fixtures/kb/kb_answer.script.json", "--db", db,
              "--query", "I was charged twice for my order", "--format", "jsonl", env_config=config)
    assert run.returncode == 0, run.stderr
    events = [json.loads(line) for line in run.stdout.splitlines()]
    retrieval = next(e["data"] for e in events if e["event"] == "node_finished"
                     and e["data"]["component_id"] == "Retrieval:Docs")
    assert retrieval["outputs"]["json"][0]["docnm_kwd"] == "refunds.md"
    assert "charged twice" in retrieval["outputs"]["formalized_content"]


def test_jsonl_reports_each_components_progress_and_a_failing_file_stops_at_its_parser(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Plain words.\n")
    (docs / "b.exe").write_bytes(b"MZ\x00")
    out = cli("ingest", str(PIPELINE), str(docs), "--kb", "k", "--db", str(tmp_path / "s.db"), "--format", "jsonl")
    assert out.returncode == 1
    events = [json.loads(line) for line in out.stdout.splitlines()]
    a = [e["data"] for e in events if e["event"] == "progress" and e["data"]["name"] == "a.txt"]
    assert [e["component_id"] for e in a if e["progress"] == 1] == \
        ["File", "File", "Parser:Docs", "TokenChunker:Chunks", "Tokenizer:Index"]
    b = [e["data"] for e in events if e["event"] == "progress" and e["data"]["name"] == "b.exe"]
    assert b[-1]["component_id"] == "Parser:Docs" and b[-1]["progress"] == -1
    assert "No suitable for file extension: `.exe`" in b[-1]["message"]
    failed = next(e["data"] for e in events if e["event"] == "file_failed")
    assert failed["name"] == "b.exe"
    finished = next(e["data"] for e in events if e["event"] == "ingest_finished")
    assert (finished["ingested"], finished["failed"]) == (1, 1)
    # again: the stored file is unchanged, the failed one runs afresh (and fails the same way)
    out = cli("ingest", str(PIPELINE), str(docs), "--kb", "k", "--db", str(tmp_path / "s.db"), "--format", "jsonl")
    events = [json.loads(line) for line in out.stdout.splitlines()]
    assert [e["data"]["name"] for e in events if e["event"] == "file_skipped"] == ["a.txt"]
    assert any(e["event"] == "progress" and e["data"]["name"] == "b.exe" and e["data"]["component_id"] == "File"
               for e in events)


def test_a_killed_file_resumes_from_its_last_finished_component(tmp_path):
    docs = mixed_folder(tmp_path)
    compiled, _ = diagnose(PIPELINE.read_bytes())
    store = EmbeddedBackend(tmp_path / "retrieval.db")
    items = [i for i in expand([str(docs)]) if i.name == "exchanges.docx"]

    async def main():
        async with open_checkpointer(str(tmp_path / "s.db")) as saver:
            context = RunEnvironment(RunSettings()).context("t")
            ingestor = Ingestor(compiled, saver, store, context, kb_id="kb")
            item = items[0]
            config = ingestor.thread_config(doc_id_for("kb", item.name), ingestor.content_hash(item.path.read_bytes()))
            file = {"name": item.name, "path": str(item.path), "size": 0, "sha256": ""}
            # the process dies after the Parser: the thread's checkpoint is all that is left
            async for _ in ingestor.graph.astream({"file": file}, config, context=context,
                                                   interrupt_after=["Parser.Docs"]):
                pass
            events = []
            ingestor.on_event = events.append
            report = await ingestor.run(items)
            state = await ingestor.graph.aget_state(config)
            return events, report, state.values
    events, report, values = asyncio.run(main())
    assert (report.ingested, report.chunks) == (1, 2)
    assert next(e["data"] for e in events if e["event"] == "file_started")["resumed"] is True
    ran_again = {e["data"]["component_id"] for e in events if e["event"] == "progress"}
    assert ran_again == {"TokenChunker:Chunks", "Tokenizer:Index"}
    assert values == {}                  # stored: the file's thread is gone, the store's hash marks it done
    store.close()


def test_the_tokenizer_embeds_with_the_datasets_model_weighted_by_the_file_name(tmp_path):
    from tests.runtime.services.retrieval.conftest import EmbeddingServer, vec
    server = EmbeddingServer()
    server.vectors["refunds.md"] = vec(1.0)                   # the file name's vector
    server.default = vec(0.0, 1.0)                            # every chunk's
    try:
        config = tmp_path / "retrieval.toml"
        config.write_text(f'timeout = 120\n[embeddings."e@OpenAI-API-Compatible"]\nbase_url = "{server.url}"\n'
                          'model = "e"\n')
        docs = tmp_path / "docs"
        docs.mkdir()
        shutil.copy(REPO / "fixtures" / "kb" / "docs" / "refunds.md", docs)
        out = cli("ingest", str(PIPELINE), str(docs), "--kb", "vec-kb", "--db", str(tmp_path / "s.db"),
                  "--embd-id", "e@OpenAI-API-Compatible", env_config=config)
        assert out.returncode == 0, out.stderr
    finally:
        server.close()
    store = EmbeddedBackend(tmp_path / "retrieval.db")
    assert store.datasets()[0]["embd_id"] == "e@OpenAI-API-Compatible"
    import numpy as np
    blob, dims = store.db.execute("SELECT vector, dims FROM chunks").fetchone()
    vector = np.frombuffer(blob, dtype=np.float32)
    assert dims == len(vector) and vector[0] == pytest.approx(0.1) and vector[1] == pytest.approx(0.9)
    store.close()
    assert any(r.get("input") == ["refunds.md"] for r in server.requests)


# compiler.json names no template group: tests/nodes/pipeline/test_compiler.py ingests with it given one
@pytest.mark.parametrize("path", [p for p in SHIPPED if p.stem != "compiler"], ids=lambda p: p.stem)
def test_every_shipped_pipeline_ingests_a_mixed_folder_and_fails_only_the_files_it_names(path, tmp_path):
    docs = mixed_folder(tmp_path)
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"auto_reply": "refund charged twice"}))
    db = str(tmp_path / "s.db")
    done = cli("ingest", str(path), str(docs), "--kb", "shipped", "--db", db, "--llm-script", str(script),
               "--default-llm", "gpt-4o@OpenAI", "--format", "jsonl")
    assert done.returncode in (0, 1), done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    failed = {e["data"]["name"]: e["data"]["error"] for e in events if e["event"] == "file_failed"}
    finished = {e["data"]["name"] for e in events if e["event"] == "file_finished"}
    assert "refunds.md" in finished and finished | set(failed) == {p.name for p in docs.iterdir()}
    _, diags = diagnose(path.read_bytes(), default_llm="gpt-4o@OpenAI")
    named = {d.field.rsplit(".", 1)[-1] for d in diags if d.code in ("needs-service", "unknown-family")}
    for name, error in failed.items():     # a failure is a family the compile warnings named, or none at all
        assert error.startswith("Parser:") and (any(f"{family}:" in error or f"'{family}'" in error for family in named)
                                                or "No suitable for file extension" in error), (name, error)
    store = EmbeddedBackend(tmp_path / "retrieval.db")
    try:
        if '"Tokenizer"' in path.read_text():
            found = asyncio.run(store.retrieve(RetrievalRequest("I was charged twice for my order", ["shipped"])))
            assert found.chunks and "refunds.md" in {c["docnm_kwd"] for c in found.chunks}
        else:       # as in RAGFlow, no Tokenizer writes no full-text fields: the chunks are stored, text only
            rows = [json.loads(r[0]) for r in store._query("SELECT fields FROM chunks")]
            refunds = [r for r in rows if r["docnm_kwd"] == "refunds.md"]
            assert refunds and any("charged twice" in r["content_with_weight"] for r in refunds)
            assert not any(r.get("content_ltks") for r in refunds)
    finally:
        store.close()
