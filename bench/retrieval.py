"""Retrieval throughput and latency on a generated 10,000-chunk corpus, embedded store and Elasticsearch API.

    python -m bench.retrieval [--chunks 10000] [--queries 50] [--dims 512] [--es URL] [--timeout 300] [--docs 60]

Chunks are tokenized with RAGFlow's tokenizer (part of what indexing costs) and carry random vectors.
Without --es, a noida-db Elasticsearch 8 API is started on a free 127.0.0.1 port when installed.
Queries go through the full flow (question building, search, window kNN, re-scoring) with a local
embedding endpoint that answers instantly, so the figures are the backends' and the re-scoring's.
Ingestion throughput (`ingest` beside `index`, pages and chunks per second) comes first: bench/ingest.py.
"""
from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path

WORDS = ("refund policy damaged car shipping depot warranty battery screen invoice charge order delivery express "
         "tracking parcel carrier insurance water price tax discount coupon account password login email support "
         "ticket agent manual install update firmware device cable adapter").split()


def corpus(n: int, dims: int, seed: int = 7) -> list[tuple[str, list[float]]]:
    rnd = random.Random(seed)
    return [(" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(40, 90))), [rnd.gauss(0, 1) for _ in range(dims)])
            for _ in range(n)]


def build_chunks(texts, kb: str) -> list[dict]:
    from canvas2graph.runtime.services.retrieval.indexing import chunk_fields
    from canvas2graph.runtime.services.retrieval.tokenizer import get_tokenizer
    tk = get_tokenizer()
    out = []
    for i, (text, vector) in enumerate(texts):
        f = chunk_fields(tk, content=text, doc_id=f"doc{i // 20}", kb_id=kb, doc_name=f"doc{i // 20}.md", order=i % 20,
                         page=None)
        f[f"q_{len(vector)}_vec"] = vector
        out.append(f)
    return out


def pct(values, q):
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


async def measure_queries(backend, questions, kb) -> list[float]:
    from canvas2graph.runtime.services.retrieval import RetrievalRequest
    times = []
    for q in questions:
        t = time.perf_counter()
        await backend.retrieve(RetrievalRequest(q, [kb]))
        times.append((time.perf_counter() - t) * 1000)
    return times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=10000)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--dims", type=int, default=512)
    ap.add_argument("--es", help="an Elasticsearch 8 API URL (default: start noida-db)")
    ap.add_argument("--docs", type=int, default=60, help="documents for the ingestion figures (0: skip them)")
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="seconds one search may take (noida-db needs tens of seconds at 10,000 chunks)")
    args = ap.parse_args()
    if args.docs:
        from bench.ingest import report
        report(args.docs)

    from canvas2graph.runtime.services.retrieval import RetrievalConfig
    from canvas2graph.runtime.services.retrieval.config import Endpoint
    from tests.runtime.services.retrieval.conftest import EmbeddingServer, noida_exe, start_noida, stop_group

    rnd = random.Random(3)
    questions = [" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(2, 8))) for _ in range(args.queries)]
    embed = EmbeddingServer()
    embed.default = [rnd.gauss(0, 1) for _ in range(args.dims)]
    t = time.perf_counter()
    texts = corpus(args.chunks, args.dims)
    chunks = build_chunks(texts, "bench")
    tokenize_s = time.perf_counter() - t
    print(f"corpus: {args.chunks} chunks, {args.dims}-d vectors; tokenizing (RAGFlow's tokenizer) {tokenize_s:.1f} s "
          f"= {args.chunks / tokenize_s:.0f} chunks/s")

    def config(tenant=None):
        cfg = RetrievalConfig.from_dict({"timeout": args.timeout, "default_embd_id": "bench@OpenAI-API-Compatible",
                                         **({"datasets": {"bench": {"tenant": tenant}}} if tenant else {})})
        cfg.embeddings["bench@OpenAI-API-Compatible"] = Endpoint(base_url=embed.url, model="bench")
        return cfg

    with tempfile.TemporaryDirectory() as tmp:
        bench_embedded(tmp, chunks, questions, config)
        proc = None
        url = args.es
        if url is None:
            exe = noida_exe()
            if exe is None:
                print("elasticsearch API: skipped (noida-db is not installed and no --es URL was given)")
                embed.close()
                return
            proc, url = start_noida(exe, Path(tmp) / "noida")
        try:
            bench_elasticsearch(url, "noida-db" if proc else url, chunks, questions, config, args.timeout)
        finally:
            if proc is not None:
                stop_group(proc)
    embed.close()


def bench_embedded(folder: str, chunks: list[dict], questions: list[str], config) -> None:
    """The embedded store (SQLite in `folder`): chunks stored per second, query latency."""
    from canvas2graph.runtime.services.retrieval import open_backend
    local = open_backend(f"sqlite://{folder}/bench.db", config())
    t = time.perf_counter()
    local.add_chunks("bench", chunks, "bench@OpenAI-API-Compatible")
    store_s = time.perf_counter() - t

    async def local_queries():
        await measure_queries(local, questions[:2], "bench")          # warm the tokenizer
        return await measure_queries(local, questions, "bench")
    times = asyncio.run(local_queries())
    print(f"embedded: store {len(chunks) / store_s:.0f} chunks/s; query p50 {pct(times, 50):.1f} ms, "
          f"p95 {pct(times, 95):.1f} ms")
    local.close()


def bench_elasticsearch(url: str, name: str, chunks: list[dict], questions: list[str], config,
                        timeout: float) -> None:
    """An Elasticsearch API at `url` (RAGFlow's index layout): bulk indexing per second, query latency."""
    import json

    from elasticsearch import Elasticsearch, helpers

    from canvas2graph.runtime.services.retrieval import open_backend
    es = Elasticsearch(url, request_timeout=max(120.0, timeout))
    tenant = uuid.uuid4().hex[:8]
    mapping = json.loads((Path(__file__).resolve().parents[2] / "shared" / "ragflow" / "es-mapping.json").read_text())
    es.indices.create(index=f"ragflow_{tenant}", body=mapping)
    t = time.perf_counter()
    helpers.bulk(es, ({"_index": f"ragflow_{tenant}", "_id": c["id"], "_source": c} for c in chunks),
                 chunk_size=500, refresh=True)
    bulk_s = time.perf_counter() - t

    async def remote_queries():
        remote = open_backend(url.replace("http://", "elasticsearch://"), config(tenant))
        try:
            await measure_queries(remote, questions[:2], "bench")
            return await measure_queries(remote, questions, "bench")
        finally:
            await remote.aclose()
    times = asyncio.run(remote_queries())
    print(f"elasticsearch API ({name}): bulk {len(chunks) / bulk_s:.0f} chunks/s; "
          f"query p50 {pct(times, 50):.1f} ms, p95 {pct(times, 95):.1f} ms")
    es.indices.delete(index=f"ragflow_{tenant}")


if __name__ == "__main__":
    main()
