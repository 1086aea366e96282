"""Ingestion throughput: `canvas2graph ingest` (a pipeline DSL, one checkpointed LangGraph run per file)
beside `canvas2graph index` (the fixed chunker), on the same generated folder of documents.

    python -m bench.ingest [--docs 60]            (also part of python -m bench.retrieval)

The folder holds Markdown, text and HTML documents and three-page PDFs in equal numbers; both write the
embedded store without embeddings, so the figures are parsing, chunking, tokenizing, checkpointing and
storing. Pages: a PDF's pages, one for any other document.
"""
from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PIPELINE = REPO / "fixtures" / "kb" / "pipeline.json"


def make_folder(root: Path, n: int, seed: int = 11) -> int:
    """n documents under `root`; returns their page count."""
    from reportlab.pdfgen import canvas
    from bench.retrieval import WORDS
    rnd = random.Random(seed)

    def para() -> str:
        return " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(30, 80))) + "."
    pages = 0
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        kind = i % 4
        if kind == 0:
            (root / f"doc{i}.md").write_text("".join(f"## Part {j}\n\n{para()}\n\n" for j in range(6)))
        elif kind == 1:
            (root / f"doc{i}.txt").write_text("\n".join(para() for _ in range(6)))
        elif kind == 2:
            (root / f"doc{i}.html").write_text("<html><body>" + "".join(f"<h2>Part {j}</h2><p>{para()}</p>"
                                                                       for j in range(6)) + "</body></html>")
        else:
            pdf = canvas.Canvas(str(root / f"doc{i}.pdf"))
            for _ in range(3):
                for line in range(20):
                    pdf.drawString(40, 760 - line * 30, " ".join(rnd.choice(WORDS) for _ in range(10)))
                pdf.showPage()
            pdf.save()
            pages += 2
        pages += 1
    return pages


async def run_ingest(folder: Path, tmp: Path):
    from canvas2graph.compiler.canvas import compile_dsl
    from canvas2graph.runtime.run.checkpoint import open_checkpointer
    from canvas2graph.runtime.services.environment import RunEnvironment, RunSettings
    from canvas2graph.runtime.run.ingest.run import Ingestor, expand
    from canvas2graph.runtime.services.retrieval.embedded import EmbeddedBackend
    compiled = compile_dsl(PIPELINE.read_bytes())
    store = EmbeddedBackend(tmp / "ingest.db")
    async with open_checkpointer(str(tmp / "checkpoints.db")) as saver:
        ingestor = Ingestor(compiled, saver, store, RunEnvironment(RunSettings()).context("bench"), kb_id="bench")
        started = time.perf_counter()
        report = await ingestor.run(expand([str(folder)]))
        seconds = time.perf_counter() - started
    store.close()
    return report, seconds


async def run_index(folder: Path, tmp: Path):
    from canvas2graph.runtime.services.retrieval.embedded import EmbeddedBackend
    from canvas2graph.runtime.services.retrieval.indexing import index_files
    store = EmbeddedBackend(tmp / "index.db")
    started = time.perf_counter()
    report = await index_files(store, [str(folder)], "bench", progress=False)
    seconds = time.perf_counter() - started
    store.close()
    return report, seconds


def report(n: int) -> None:
    from canvas2graph.runtime.services.retrieval.tokenizer import get_tokenizer
    get_tokenizer()                       # loaded once, outside both timings
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        pages = make_folder(tmp / "docs", n)
        ingested, ingest_s = asyncio.run(run_ingest(tmp / "docs", tmp))
        indexed, index_s = asyncio.run(run_index(tmp / "docs", tmp))
    print(f"ingestion ({n} documents, {pages} pages; no embeddings):")
    print(f"  canvas2graph ingest (pipeline {PIPELINE.name}): {pages / ingest_s:.1f} pages/s, "
          f"{ingested.chunks / ingest_s:.1f} chunks/s ({ingested.chunks} chunks, {ingest_s:.1f} s, "
          f"{ingested.failed} failed)")
    print(f"  canvas2graph index: {pages / index_s:.1f} pages/s, {indexed.chunks / index_s:.1f} chunks/s "
          f"({indexed.chunks} chunks, {index_s:.1f} s)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=60, help="documents to generate (a quarter of them 3-page PDFs)")
    report(ap.parse_args().docs)


if __name__ == "__main__":
    main()
