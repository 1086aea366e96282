"""`canvas2graph ingest PIPELINE FILE_OR_FOLDER... --kb NAME`: a pipeline DSL run over files into a dataset.

The pipeline compiles as `compile` checks it (its warnings, such as a parse method that needs a
service, are printed first); each file then runs as its own checkpointed LangGraph thread in the
sessions database (`--db`), and its chunks go to the retrieval store (`--retrieval`, by default
`retrieval.db` beside the sessions database) under the dataset `--kb`, where an agent's Retrieval
finds them. Run it again after a stop: finished files are skipped (unchanged), a file that was
being ingested continues from its last finished component.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from canvas2graph.types import UsageError


def add_ingest_command(sub) -> None:
    """The `ingest` subcommand's options (canvas2graph/cli/main.py registers it)."""
    from canvas2graph.cli.parser import add_db, add_default_llm
    i = sub.add_parser("ingest", help="run a RAGFlow ingestion pipeline DSL over files into a dataset")
    i.add_argument("pipeline", help="the pipeline DSL (canvas_type \"Ingestion Pipeline\"): a JSON file")
    i.add_argument("paths", nargs="+", metavar="FILE_OR_FOLDER", help="files, or folders to ingest every file of")
    i.add_argument("--kb", required=True, help="the dataset the chunks belong to (what an agent's Retrieval lists "
                                               "in dataset_ids)")
    i.add_argument("--retrieval", help="where the chunks go: sqlite:///path (default: retrieval.db beside the sessions "
                                       "database) or elasticsearch://[user:pass@]host:port (RAGFlow's indexes)")
    i.add_argument("--tenant", help="Elasticsearch: the dataset's tenant, whose index ragflow_<tenant> holds it "
                                    "(default: the retrieval config's, else found from the dataset's chunks)")
    add_db(i, "checkpoints of each file's run (a SQLite file or a postgresql:// URL); the default store lives "
              "in its folder")
    i.add_argument("--llm-script", help="JSON script of model replies for the Extractors (offline runs)")
    i.add_argument("--models", help="models config file (TOML); default $CANVAS2GRAPH_MODELS")
    add_default_llm(i, "the model of Extractors and")
    i.add_argument("--embd-id", help="the dataset's embedding model (model@Factory); without one the chunks are "
                                     "stored for full-text search only")
    i.add_argument("--compiler-templates", metavar="FILE",
                   help="the Compiler's compilation template groups and templates (JSON; RAGFlow keeps them in its "
                        "database); default $CANVAS2GRAPH_COMPILER_TEMPLATES")
    i.add_argument("--format", choices=["pretty", "jsonl"], default="pretty",
                   help="pretty: a line per file (default); jsonl: every progress event as JSON")
    i.set_defaults(func="canvas2graph.cli.ingest:cmd_ingest")


def cmd_ingest(args: argparse.Namespace) -> int:
    from canvas2graph.compiler.canvas import diagnose
    from canvas2graph.cli.compile import read_source
    if args.compiler_templates:         # read by the Compiler when it is planned (nodes/pipeline/compiler.py)
        import os
        os.environ["CANVAS2GRAPH_COMPILER_TEMPLATES"] = args.compiler_templates
    compiled, diags = diagnose(read_source(args.pipeline), default_llm=args.default_llm)
    for d in diags:
        print(f"{args.pipeline}: {d}", file=sys.stderr)
    if compiled is None:
        return 1
    if compiled.kind != "pipeline":
        raise UsageError(f"{args.pipeline} is an agent canvas; ingest runs ingestion pipelines "
                         "(File -> Parser -> ... -> Tokenizer)")
    return asyncio.run(_ingest(compiled, args))


async def _ingest(compiled, args) -> int:
    from canvas2graph.runtime.run.checkpoint import open_checkpointer
    from canvas2graph.runtime.services.environment import RunEnvironment, RunSettings
    from canvas2graph.runtime.run.ingest.run import IngestError, Ingestor, expand
    from canvas2graph.runtime.services.retrieval import RetrievalError, open_backend
    from canvas2graph.runtime.services.retrieval.embedded import EmbeddedBackend

    try:
        items = expand(args.paths)
    except IngestError as e:
        raise UsageError(str(e))
    store = open_backend(args.retrieval or None, session_db=args.db)
    try:
        if not isinstance(store, EmbeddedBackend):
            store = await _es_sink(store, args)
        environment = RunEnvironment(RunSettings(llm_script=args.llm_script, models_config=args.models, db=args.db))
        context = environment.context(f"ingest:{args.kb}")
        embedder = store.models.embedder(args.embd_id) if args.embd_id else None
        printer = _printer(args.format)
        async with open_checkpointer(args.db) as saver:
            ingestor = Ingestor(compiled, saver, store, context, kb_id=args.kb, embd_id=args.embd_id,
                                embedder=embedder, on_event=printer)
            report = await ingestor.run(items)
    except (RetrievalError, IngestError) as e:
        print(f"canvas2graph: {e}", file=sys.stderr)
        return 1
    finally:
        await store.aclose()
    if args.format == "pretty":
        print(f"{args.kb}: {report.ingested} file(s) ingested ({report.chunks} chunks), {report.unchanged} unchanged, "
              f"{report.failed} failed, in {store.describe()}")
    return 0 if report.failed == 0 else 1


async def _es_sink(backend, args):
    """The Elasticsearch index the dataset lives in: --tenant, the config's tenant, or discovery."""
    from canvas2graph.runtime.run.ingest.es_sink import ElasticsearchSink
    from canvas2graph.runtime.services.retrieval import RetrievalError
    tenant = args.tenant or backend.cfg.tenants.get(args.kb)
    if not tenant:
        try:
            tenant = await backend.tenant_of(args.kb)
        except RetrievalError:
            await backend.aclose()
            raise UsageError(f"dataset {args.kb} is not in Elasticsearch yet: name its tenant with --tenant "
                             "(its chunks go to the index ragflow_<tenant>)")
    return ElasticsearchSink(backend, tenant)


def _printer(fmt: str):
    def pretty(event: dict[str, Any]) -> None:
        kind, data = event.get("event"), event.get("data") or {}
        if kind == "file_finished":
            print(f"  {data['name']}: {data['chunks']} chunk(s)")
        elif kind == "file_skipped":
            print(f"  {data['name']}: unchanged")
        elif kind == "file_failed":
            print(f"  {data['name']}: failed: {data['error']}")

    def jsonl(event: dict[str, Any]) -> None:
        print(json.dumps(event, ensure_ascii=False, default=str), flush=True)
    return jsonl if fmt == "jsonl" else pretty


__all__ = ["add_ingest_command", "cmd_ingest"]
