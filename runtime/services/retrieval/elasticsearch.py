"""Retrieval on the Elasticsearch indexes RAGFlow builds (RETRIEVAL.md 1-2, 6).

Chunks of a tenant's datasets live in `ragflow_<tenant>`, told apart by `kb_id`. A first request
finds the window: the boosted `query_string` over seven token fields inside a bool whose boost is
0, plus a kNN clause filtered by that same bool, so ES ranks the window by vector score alone. A
second kNN request over the window's ids gives clean `(1 + cos) / 2` scores. The rest is RAGFlow's
Python re-scoring (`canvas2graph.runtime.services.retrieval.scoring`). Requests go through the official 8.x client over
httpx; every failure becomes a RetrievalError whose message names the cluster without credentials.
"""
from __future__ import annotations

import collections
import logging
from typing import Any

from canvas2graph.runtime.services.retrieval.base import Page, Pass, ScoringBackend
from canvas2graph.runtime.services.retrieval.config import BackendURL, RetrievalConfig
from canvas2graph.runtime.services.retrieval.protocol import RetrievalError
from canvas2graph.runtime.services.retrieval.query import QUERY_FIELDS
from canvas2graph.runtime.services.retrieval.scoring import SOURCE_FIELDS, Candidate

log = logging.getLogger(__name__)

INDEX_PREFIX = "ragflow_"
META_PREFIX = "ragflow_doc_meta_"
MAX_K = 10000


def index_name(tenant: str) -> str:
    return f"{INDEX_PREFIX}{tenant}"


def filter_clauses(kb_ids: list[str], doc_ids: list[str]) -> list[dict]:
    """kb_id (always), doc_id (when a metadata filter chose documents), available chunks only."""
    clauses: list[dict] = [{"terms": {"kb_id": list(kb_ids)}}]
    if doc_ids:
        clauses.append({"terms": {"doc_id": list(doc_ids)}})
    clauses.append({"bool": {"must_not": [{"range": {"available_int": {"lt": 1}}}]}})
    return clauses


def bool_query(p: Pass) -> dict:
    """The bool of the first pass: query_string (when there is text), filters, tag features, its boost."""
    body: dict[str, Any] = {"filter": filter_clauses(p.kb_ids, p.doc_ids)}
    if p.query is not None:
        body["must"] = [{"query_string": {"fields": list(QUERY_FIELDS), "type": "best_fields", "query": p.query.text,
                                          "minimum_should_match": p.query.minimum_should_match(), "boost": 1}}]
    if p.query_tags:
        body["should"] = [{"rank_feature": {"field": f"tag_feas.{t}", "linear": {}, "boost": w}}
                          for t, w in p.query_tags.items()]
    # RAGFlow fuses with weights "0.001,1" on ES, so the text part gets boost 1 - 1 = 0 beside a kNN
    # clause; without a vector the connector uses 1 - 0.5
    body["boost"] = 0.0 if p.vector is not None else 0.5
    return {"bool": body}


def first_pass_body(p: Pass) -> dict:
    """The request body of a search pass, as RAGFlow's ES connector sends it."""
    body: dict[str, Any] = {"from": 0, "size": p.size, "_source": list(SOURCE_FIELDS)}
    if p.query is None and p.vector is None:
        # nothing to match on: a plain filtered fetch, in index order
        body["query"] = {"bool": {"filter": filter_clauses(p.kb_ids, p.doc_ids)}}
        return body
    q = bool_query(p)
    body["query"] = q
    if p.vector is not None:
        k = min(p.top_k, MAX_K)
        body["knn"] = {"field": f"q_{len(p.vector)}_vec", "k": k, "num_candidates": min(2 * k, MAX_K),
                       "query_vector": list(p.vector), "filter": q, "similarity": p.similarity}
    return body


def window_body(ids: list[str], kb_ids: list[str], vector: list[float]) -> dict:
    """The second request: kNN over the window's ids only, whose scores are then (1 + cos) / 2."""
    q = {"bool": {"filter": [{"bool": {"should": [{"terms": {"id": list(ids)}}, {"terms": {"_id": list(ids)}}],
                                       "minimum_should_match": 1}},
                             {"terms": {"kb_id": list(kb_ids)}}]}}
    return {"query": q, "knn": {"field": f"q_{len(vector)}_vec", "k": len(ids), "num_candidates": 2 * len(ids),
                                "query_vector": list(vector), "filter": q, "similarity": 0.0},
            "from": 0, "size": len(ids), "_source": False}


def stored_fields(source: dict) -> dict:
    """RAGFlow's get_fields: scalars other than strings become strings (available_int excepted)."""
    out = {}
    for k, v in source.items():
        if isinstance(v, (list, dict, str)) or v is None or k == "available_int":
            out[k] = v
        else:
            out[k] = str(v)
    return out


class ElasticsearchBackend(ScoringBackend):
    def __init__(self, url: BackendURL, cfg: RetrievalConfig | None = None):
        super().__init__(cfg)
        from elasticsearch import AsyncElasticsearch
        self.url = url
        auth = (url.username, url.password or "") if url.username else None
        self.es = AsyncElasticsearch(url.hosts, basic_auth=auth, verify_certs=self.cfg.verify_certs,
                                     request_timeout=self.cfg.timeout, max_retries=0, retry_on_timeout=False,
                                     node_class="httpxasync")
        self._tenants: dict[str, str] = dict(self.cfg.tenants)
        self._vector_fields: dict[str, set[int]] = {}
        # the last request bodies sent (name, index, body): for diagnostics and the tests
        self.sent: collections.deque = collections.deque(maxlen=32)

    def describe(self) -> str:
        return self.url.describe()

    async def aclose(self) -> None:
        await self.es.close()

    # --- ES calls, with failures in words ---------------------------------------------------
    async def _call(self, what: str, target: str, fn, **kwargs) -> Any:
        from elasticsearch import ApiError, ConnectionError as ESConnectionError, ConnectionTimeout, TransportError
        try:
            return await fn(**kwargs)
        except ConnectionTimeout:
            raise RetrievalError(f"{self.describe()} did not answer within {self.cfg.timeout:g} s ({what})") from None
        except ESConnectionError:
            raise RetrievalError(f"cannot reach {self.describe()} ({what})") from None
        except ApiError as e:
            reason = _reason(e)
            if e.status_code == 404 and "index_not_found" in reason:
                raise RetrievalError(f"index {target} does not exist on {self.describe()}") from None
            if e.status_code in (401, 403):
                raise RetrievalError(f"{self.describe()} refused the credentials ({what}: HTTP {e.status_code})") from None
            raise RetrievalError(f"{self.describe()} rejected the {what} request: HTTP {e.status_code} {reason}") from None
        except TransportError as e:
            raise RetrievalError(f"{self.describe()} failed ({what}): {type(e).__name__}") from None

    async def _search(self, what: str, indexes: list[str], body: dict) -> dict:
        index = ",".join(indexes)
        self.sent.append((what, index, body))
        resp = await self._call(what, index, self.es.search, index=index,
                                body={**body, "track_total_hits": True, "timeout": "600s"})
        return resp.body if hasattr(resp, "body") else resp

    # --- datasets -> tenants -> indexes -------------------------------------------------------
    async def tenant_of(self, kb_id: str) -> str:
        """The tenant owning a dataset: configured, or found by RAGFlow's index discovery query."""
        if kb_id in self._tenants:
            return self._tenants[kb_id]
        body = {"size": 1, "_source": False, "query": {"term": {"kb_id": kb_id}},
                "aggs": {"indexes": {"terms": {"field": "_index", "size": 10}}}}
        found = await self._search("discovery", [f"{INDEX_PREFIX}*", f"-{META_PREFIX}*"], body)
        buckets = ((found.get("aggregations") or {}).get("indexes") or {}).get("buckets") or []
        names = [b["key"] for b in buckets] or [h["_index"] for h in found.get("hits", {}).get("hits", [])]
        names = [n for n in names if n.startswith(INDEX_PREFIX) and not n.startswith(META_PREFIX)]
        if not names:
            raise RetrievalError(f"dataset {kb_id} has no chunks in any {INDEX_PREFIX}* index on {self.describe()} "
                                 f"(or set its tenant in the retrieval config)")
        self._tenants[kb_id] = names[0][len(INDEX_PREFIX):]
        return self._tenants[kb_id]

    async def indexes(self, kb_ids: list[str]) -> list[str]:
        out: list[str] = []
        for kb in kb_ids:
            name = index_name(await self.tenant_of(kb))
            if name not in out:
                out.append(name)
        return out

    async def embd_id(self, kb_ids: list[str]) -> str | None:
        ids = {self.cfg.embd_id_for(kb) for kb in kb_ids}
        if len(ids) > 1:
            shown = ", ".join(sorted(str(i) for i in ids))
            raise RetrievalError(f"the selected datasets use different embedding models ({shown}); "
                                 "RAGFlow requires one model for all")
        return ids.pop()

    async def vector_dims(self, index: str) -> set[int]:
        """The q_<dim>_vec fields the index maps (read from the live mapping, as dims vary)."""
        if index not in self._vector_fields:
            resp = await self._call("mapping", index, self.es.indices.get_mapping, index=index)
            body = resp.body if hasattr(resp, "body") else resp
            dims: set[int] = set()
            for mapping in body.values():
                for name, spec in (mapping.get("mappings", {}).get("properties") or {}).items():
                    if name.startswith("q_") and name.endswith("_vec") and spec.get("type") in ("dense_vector", "knn_vector"):
                        try:
                            dims.add(int(name[2:-4]))
                        except ValueError:
                            pass
            self._vector_fields[index] = dims
        return self._vector_fields[index]

    async def _check_dimension(self, indexes: list[str], vector: list[float]) -> None:
        for index in indexes:
            dims = await self.vector_dims(index)
            if len(vector) not in dims:
                have = ", ".join(f"q_{d}_vec" for d in sorted(dims)) or "no vector field"
                raise RetrievalError(f"wrong vector dimension: the embedding model gives {len(vector)} dimensions "
                                     f"but index {index} has {have}")

    # --- the primitives ------------------------------------------------------------------------
    async def search(self, p: Pass) -> Page:
        indexes = await self.indexes(p.kb_ids)
        if p.vector is not None:
            await self._check_dimension(indexes, p.vector)
        found = await self._search("search", indexes, first_pass_body(p))
        hits = found.get("hits", {})
        total = hits.get("total", {})
        total = total.get("value", 0) if isinstance(total, dict) else int(total or 0)
        return Page(total, [Candidate(h["_id"], stored_fields(h.get("_source") or {})) for h in hits.get("hits", [])])

    async def vector_scores(self, ids: list[str], vector: list[float], kb_ids: list[str]) -> dict[str, float]:
        if not ids:
            return {}
        found = await self._search("window", await self.indexes(kb_ids), window_body(ids, kb_ids, vector))
        return {h["_id"]: float(h.get("_score") or 0.0) for h in found.get("hits", {}).get("hits", [])}

    async def fetch(self, ids: list[str], kb_ids: list[str]) -> dict[str, dict[str, Any]]:
        """Chunks by id from the first tenant index (RAGFlow fetches parent chunks there)."""
        index = (await self.indexes(kb_ids))[0]
        out = {}
        for chunk_id in ids:
            from elasticsearch import NotFoundError
            try:
                resp = await self.es.get(index=index, id=chunk_id)
            except NotFoundError:
                continue
            except Exception:
                await self._call("get", index, self.es.get, index=index, id=chunk_id)   # raises in words
                continue
            out[chunk_id] = stored_fields(resp["_source"])
        return out

    async def document_metadata(self, kb_ids: list[str]) -> dict[str, dict[str, list[str]]]:
        """{key: {value: [doc ids]}} from ragflow_doc_meta_<tenant> for the datasets' documents."""
        metas: dict[str, dict[str, list[str]]] = {}
        for tenant in dict.fromkeys([await self.tenant_of(kb) for kb in kb_ids]):
            index = f"{META_PREFIX}{tenant}"
            body = {"size": 10000, "query": {"bool": {"filter": [{"terms": {"kb_id": list(kb_ids)}}]}}}
            try:
                found = await self._search("metadata", [index], body)
            except RetrievalError as e:
                if "does not exist" in str(e):
                    continue        # no document of this tenant has metadata
                raise
            for hit in found.get("hits", {}).get("hits", []):
                src = hit.get("_source") or {}
                doc_id = src.get("id") or hit["_id"]
                for key, value in (src.get("meta_fields") or {}).items():
                    for v in value if isinstance(value, list) else [value]:
                        metas.setdefault(key, {}).setdefault(str(v), []).append(doc_id)
        return metas


def _reason(e: Exception) -> str:
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            return f"{err.get('type', '')}: {err.get('reason', '')}".strip(": ")
        if err:
            return str(err)
    return getattr(e, "message", "") or type(e).__name__
