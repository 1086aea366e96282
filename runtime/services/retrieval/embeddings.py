"""Query embeddings and rerank scores from OpenAI-compatible endpoints, one per model id.

RAGFlow stores each knowledge base's embedding model as `embd_id` (`model@Factory`). The query
vector must come from that same model, or its cosine scores mean nothing; RAGFlow's
OpenAI-compatible providers have no separate query mode, so a plain embeddings call matches them.
An endpoint comes from the retrieval config's `[embeddings."<embd_id>"]`, or else from the chat
models' provider table (factory base URL and key variable, see docs/models.md).
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import httpx

from canvas2graph.runtime.services.retrieval.config import Endpoint, RetrievalConfig
from canvas2graph.runtime.services.retrieval.protocol import RetrievalError


@dataclass(frozen=True)
class ResolvedEndpoint:
    model_id: str
    model: str
    base_url: str
    api_key: str


def resolve(model_id: str, table: dict[str, Endpoint], cfg: RetrievalConfig, what: str) -> ResolvedEndpoint:
    import os
    entry = table.get(model_id)
    if entry is not None and entry.base_url:
        key = (os.environ.get(entry.api_key_env, "") if entry.api_key_env else "") or entry.api_key or "EMPTY"
        model = entry.model or model_id.rsplit("@", 1)[0]
        return ResolvedEndpoint(model_id, model, entry.base_url.rstrip("/"), key)
    from canvas2graph.runtime.services.models import ModelConfigError, ModelFactory
    try:
        # the chat models' provider table knows every factory's base URL and key variable
        resolved = ModelFactory(config_path=cfg.models_config)._resolve(model_id, None)
    except ModelConfigError as e:
        raise RetrievalError(f"{what} {model_id!r} is not configured: {e.message} "
                             f"(or add [{'embeddings' if what.startswith('embedding') else 'rerank'}.\"{model_id}\"] "
                             f"to the retrieval config)") from None
    model = entry.model if entry is not None and entry.model else resolved.model
    return ResolvedEndpoint(model_id, model, resolved.base_url.rstrip("/"), resolved.api_key)


class Embedder:
    """Embeds queries with one model through langchain-openai's OpenAIEmbeddings."""

    def __init__(self, endpoint: ResolvedEndpoint, timeout: float):
        from langchain_openai import OpenAIEmbeddings
        self.endpoint = endpoint
        # check_embedding_ctx_length=False: send the text itself; the tiktoken pre-split only suits OpenAI's models
        self._client = OpenAIEmbeddings(model=endpoint.model, base_url=endpoint.base_url, api_key=endpoint.api_key,
                                        check_embedding_ctx_length=False, max_retries=0, timeout=timeout)

    async def embed_query(self, text: str) -> list[float]:
        try:
            vector = await self._client.aembed_query(text)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            raise RetrievalError(f"embedding model {self.endpoint.model_id!r} at {self.endpoint.base_url} failed: "
                                 f"{type(e).__name__}: {_short(e)}") from None
        if not vector:
            raise RetrievalError(f"embedding model {self.endpoint.model_id!r} returned an empty vector")
        return [float(x) for x in vector]

    async def embed_documents(self, texts: list[str]) -> list[list[float]]:
        try:
            return await self._client.aembed_documents(texts)
        except Exception as e:
            raise RetrievalError(f"embedding model {self.endpoint.model_id!r} at {self.endpoint.base_url} failed: "
                                 f"{type(e).__name__}: {_short(e)}") from None


class Reranker:
    """Scores (query, document) pairs through a `/rerank` endpoint (Jina and Cohere shape, or TEI's)."""

    def __init__(self, endpoint: ResolvedEndpoint, timeout: float):
        self.endpoint = endpoint
        self.timeout = timeout

    async def similarity(self, query: str, documents: list[str]) -> list[float]:
        if not documents:
            return []
        body = {"model": self.endpoint.model, "query": query, "documents": documents, "texts": documents,
                "top_n": len(documents)}
        headers = {"Authorization": f"Bearer {self.endpoint.api_key}"}
        try:
            async with httpx.AsyncClient(timeout=self.timeout) as client:
                response = await client.post(f"{self.endpoint.base_url}/rerank", json=body, headers=headers)
            response.raise_for_status()
            data: Any = response.json()
        except httpx.HTTPStatusError as e:
            raise RetrievalError(f"rerank model {self.endpoint.model_id!r} answered HTTP {e.response.status_code}") from None
        except (httpx.HTTPError, ValueError) as e:
            raise RetrievalError(f"rerank model {self.endpoint.model_id!r} at {self.endpoint.base_url} failed: "
                                 f"{type(e).__name__}") from None
        results = data.get("results", data.get("data")) if isinstance(data, dict) else data
        scores = [0.0] * len(documents)
        for item in results or []:
            i = item.get("index")
            if isinstance(i, int) and 0 <= i < len(documents):
                scores[i] = float(item.get("relevance_score", item.get("score", 0.0)))
        return scores


def _short(e: Exception) -> str:
    text = str(e).replace("\n", " ")
    return text[:300]


class ModelEndpoints:
    """Embedders and rerankers by model id, built once per backend."""

    def __init__(self, cfg: RetrievalConfig):
        self.cfg = cfg
        self._embedders: dict[str, Embedder] = {}
        self._rerankers: dict[str, Reranker] = {}

    def embedder(self, embd_id: str) -> Embedder:
        if embd_id not in self._embedders:
            self._embedders[embd_id] = Embedder(resolve(embd_id, self.cfg.embeddings, self.cfg, "embedding model"),
                                                self.cfg.timeout)
        return self._embedders[embd_id]

    def reranker(self, rerank_id: str) -> Reranker:
        if rerank_id not in self._rerankers:
            self._rerankers[rerank_id] = Reranker(resolve(rerank_id, self.cfg.rerankers, self.cfg, "rerank model"),
                                                  self.cfg.timeout)
        return self._rerankers[rerank_id]
