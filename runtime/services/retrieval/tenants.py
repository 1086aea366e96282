"""Datasets of a server's tenants in one embedded store, kept apart.

A server's tenants name their datasets themselves (`POST /api/v1/datasets/{id}/ingest`), so two tenants
may both call one "support". The embedded store keeps a tenant's dataset under a scoped id,
`t/<tenant>/<dataset>` (a dataset id has no "/", so the scoped id names one tenant and one dataset),
and everything made from the id (document ids, chunk ids, the ingestion threads) is the tenant's own.

A run on behalf of a tenant (`ctx.extras["tenant"]`, set by the server) searches through
`TenantDatasets`: each dataset id it names is the tenant's own dataset when the tenant has one by that
name, else the store's shared dataset of that id (one the operator indexed with `canvas2graph index`
or `ingest`, which every tenant's agents may search, as before). Another tenant's datasets cannot be
named at all: a scoped id given by a run is a dataset not found (as one that does not exist).
Results name the dataset as the run named it, never by its scoped id.

Elasticsearch needs none of this: RAGFlow keeps each tenant's chunks in its own index, `ragflow_<tenant>`.
"""
from __future__ import annotations

import dataclasses
from typing import Any

PREFIX = "t/"


def scoped_id(tenant: str, dataset_id: str) -> str:
    """The store's id of a tenant's dataset."""
    if not tenant:
        raise ValueError("a tenant's dataset needs the tenant")
    if "/" in dataset_id:
        raise ValueError(f"a dataset id has no '/': {dataset_id!r}")
    return f"{PREFIX}{tenant}/{dataset_id}"


def is_scoped(kb_id: str) -> bool:
    return kb_id.startswith(PREFIX)


class TenantDatasets:
    """A retrieval backend as one tenant sees the embedded store: its own datasets and the shared ones."""

    def __init__(self, backend, tenant: str):
        self.backend = backend
        self.tenant = tenant

    def __getattr__(self, name: str) -> Any:     # cfg, models, warm(), fulltext()...: the store's own
        return getattr(self.backend, name)

    def describe(self) -> str:
        return self.backend.describe()

    async def aclose(self) -> None:
        """The store is the server's, shared by every run: a run's view does not close it."""

    def _resolve(self, kb_ids: list[str]) -> tuple[list[str], dict[str, str]]:
        """(the store's ids, {store id: the name the run gave}) for the dataset ids a run names."""
        wanted = {k: scoped_id(self.tenant, k) for k in kb_ids if k and "/" not in k}
        own: set[str] = set()
        if wanted:
            marks = ",".join("?" * len(wanted))
            own = {r[0] for r in self.backend._query(f"SELECT id FROM kbs WHERE id IN ({marks})", list(wanted.values()))}
        out: list[str] = []
        names: dict[str, str] = {}
        for k in kb_ids:
            if not k:
                continue
            if k in wanted and wanted[k] in own:
                out.append(wanted[k])
                names[wanted[k]] = k
            elif not is_scoped(k):
                out.append(k)
            # else a scoped id named outright: no tenant's dataset is reachable that way
        if not out and kb_ids:
            from canvas2graph.runtime.services.retrieval.protocol import RetrievalError
            raise RetrievalError(f"dataset(s) {', '.join(k for k in kb_ids if k)} not found in {self.describe()} "
                                 "(index files with: canvas2graph index PATH --kb NAME)")     # as the store says
        return out, names

    async def retrieve(self, request):
        kb_ids, names = self._resolve(list(request.kb_ids))
        result = await self.backend.retrieve(dataclasses.replace(request, kb_ids=kb_ids))
        for chunk in result.chunks:
            if chunk.get("kb_id") in names:
                chunk["kb_id"] = names[chunk["kb_id"]]
        return result

    async def document_metadata(self, kb_ids: list[str]) -> dict[str, dict[str, list[str]]]:
        return await self.backend.document_metadata(self._resolve(list(kb_ids))[0])


def for_tenant(backend, tenant: str | None):
    """The backend a tenant's run searches: scoped for an embedded store, else the backend itself."""
    from canvas2graph.runtime.services.retrieval.embedded import EmbeddedBackend
    if not tenant or not isinstance(backend, EmbeddedBackend):
        return backend
    return TenantDatasets(backend, tenant)
