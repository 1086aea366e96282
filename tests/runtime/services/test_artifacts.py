"""Artifacts (CodeExec's files, DocGenerator's and ExcelProcessor's documents) a run of a tenant stores are
recorded as that tenant's: the server's authenticated routes find them for it and for no one else."""
from __future__ import annotations

from canvas2graph.runtime.services.sandbox import CodePolicy, owned_artifact, store_document, stored_artifact


def test_a_tenants_artifact_is_found_by_its_id_or_name_for_that_tenant_only(tmp_path):
    policy = CodePolicy.resolve({"artifacts_dir": str(tmp_path)})
    stored = store_document("minutes.pdf", b"%PDF-1.4", "application/pdf", policy, owner="Acme Corp")
    name = stored["url"].rsplit("/", 1)[-1]
    doc_id = name.split(".")[0]
    for key in (doc_id, name):
        path, record = owned_artifact(key, "Acme Corp", policy)
        assert path.read_bytes() == b"%PDF-1.4"
        assert (record["name"], record["mime_type"], record["size"]) == ("minutes.pdf", "application/pdf", 8)
    assert owned_artifact(doc_id, "other", policy) is None
    assert owned_artifact("../owners", "Acme Corp", policy) is None


def test_an_artifact_without_an_owner_is_only_reachable_by_its_link(tmp_path):
    policy = CodePolicy.resolve({"artifacts_dir": str(tmp_path)})
    name = store_document("chart.png", b"\x89PNG", "image/png", policy)["url"].rsplit("/", 1)[-1]
    assert stored_artifact(name, policy) is not None
    assert owned_artifact(name, "local", policy) is None
    assert stored_artifact("owners", policy) is None          # the records are never served as artifacts
