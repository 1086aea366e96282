"""The file store: entries in RAGFlow's shape, bytes by (owner, id), tenants kept apart, data URIs, and
`canvas2graph run --file` putting files into it."""
from __future__ import annotations

import base64
import json
import subprocess

import pytest

from canvas2graph.runtime.services.files import FileStoreError, LocalFileStore, load_files, owner_folder, store_for
from tests.conftest import REPO
from tests import forkserver


def test_put_returns_ragflows_entry_and_get_reads_the_bytes_back(tmp_path):
    store = LocalFileStore(tmp_path)
    entry = store.put("report.csv", b"a,b\n1,2\n", created_by="acme")
    assert set(entry) == {"id", "name", "size", "extension", "mime_type", "created_by", "created_at", "preview_url"}
    assert (entry["name"], entry["size"], entry["extension"], entry["mime_type"]) == ("report.csv", 8, "csv", "text/csv")
    assert store.get(entry["id"], "acme") == b"a,b\n1,2\n"
    assert store.entry(entry["id"], "acme")["name"] == "report.csv"


def test_names_and_ids_cannot_leave_the_store_folder(tmp_path):
    store = LocalFileStore(tmp_path / "files")
    entry = store.put("../../etc/passwd", b"x")
    assert entry["name"] == "passwd" and (tmp_path / "files" / "local" / entry["id"]).is_file()
    for file_id, owner in (("../x", "local"), (entry["id"], ".."), (entry["id"], "a/b")):
        with pytest.raises(FileStoreError):
            store.get(file_id, owner)


def test_load_files_follows_lists_form_fields_and_data_uris(tmp_path):
    store = LocalFileStore(tmp_path)
    a, b = store.put("a.txt", b"A"), store.put("b.txt", b"B")
    uri = "data:text/csv;base64," + base64.b64encode(b"x,y\n").decode()
    found = load_files([a, {"type": "file", "value": [b]}, uri, "plain text", 42], store)
    assert [(f.name, f.data) for f in found] == [("a.txt", b"A"), ("b.txt", b"B"), ("uploaded.csv", b"x,y\n")]


def test_a_tenant_only_reads_its_own_files(tmp_path):
    store = LocalFileStore(tmp_path)
    theirs = store.put("secret.xlsx", b"S", created_by="other")
    with pytest.raises(FileStoreError, match="does not belong to this tenant"):
        load_files(theirs, store, tenant="mine")
    forged = {**theirs, "created_by": "mine"}          # claiming the id as one's own finds nothing
    with pytest.raises(FileStoreError, match="no uploaded file"):
        load_files(forged, store, tenant="mine")
    assert load_files(theirs, store, tenant="other")[0].data == b"S"


def test_an_unknown_id_is_a_clear_error(tmp_path):
    with pytest.raises(FileStoreError, match="no uploaded file"):
        load_files({"id": "0" * 32, "name": "x.csv"}, LocalFileStore(tmp_path))


def test_the_store_comes_from_the_runs_extras_or_the_environment(tmp_path, monkeypatch):
    assert store_for({"files": str(tmp_path)}).root == tmp_path
    monkeypatch.setenv("CANVAS2GRAPH_FILES_DIR", str(tmp_path / "env"))
    assert store_for({}).root == tmp_path / "env"


def test_run_file_uploads_into_sys_files_and_begin_fields(tmp_path):
    csv = tmp_path / "sales.csv"
    csv.write_text("region,total\nnorth,10\nsouth,5\n")
    dsl = {"components": {
        "begin": {"obj": {"component_name": "Begin", "params": {"mode": "task", "inputs": {
            "sheet": {"type": "file", "name": "Sheet", "optional": True}}}}, "downstream": ["ExcelProcessor:A"]},
        "ExcelProcessor:A": {"obj": {"component_name": "ExcelProcessor", "params": {
            "input_files": ["{sys.files}", "{begin@sheet}"]}}, "downstream": ["Message:M"]},
        "Message:M": {"obj": {"component_name": "Message", "params": {"content": ["{ExcelProcessor:A@summary}"]}},
                      "downstream": []}}}
    (tmp_path / "dsl.json").write_text(json.dumps(dsl))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "CANVAS2GRAPH_FILES_DIR": str(tmp_path / "store")}
    proc = subprocess.run([*forkserver.python(), "-m", "canvas2graph.cli", "run", str(tmp_path / "dsl.json"), "--format", "jsonl",
                           "--db", str(tmp_path / "s.db"), "--file", str(csv), "--file", f"sheet={csv}"],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    finished = next(e["data"] for e in events if e["event"] == "node_finished"
                    and e["data"]["component_id"] == "ExcelProcessor:A")
    assert finished["outputs"]["summary"] == ("**sales.csv**: 2 rows, 2 columns (region, total)\n"
                                              "**sales.csv**: 2 rows, 2 columns (region, total)")
    assert len(list((tmp_path / "store" / "local").glob("*.json"))) == 2
    bad = subprocess.run([*forkserver.python(), "-m", "canvas2graph.cli", "run", str(tmp_path / "dsl.json"),
                          "--db", str(tmp_path / "s.db"), "--file", str(tmp_path / "missing.csv")],
                         capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert bad.returncode == 2 and "cannot read" in bad.stderr and "missing.csv" in bad.stderr


def test_any_tenant_name_gets_a_folder_of_its_own_inside_the_store(tmp_path):
    store = LocalFileStore(tmp_path / "files")
    for tenant in ("acme", "Ann Smith", "../etc", "é/ü", "~x"):
        entry = store.put("a.txt", tenant.encode(), created_by=tenant)
        assert store.get(entry["id"], tenant) == tenant.encode() and entry["created_by"] == tenant
        assert store.path(entry["id"], tenant).parent.parent == tmp_path / "files"
    assert owner_folder("acme") == "acme" and owner_folder("Ann Smith").startswith("~")
    assert owner_folder("~x") != "~x"                 # a digest's folder cannot be claimed by naming it


def test_usage_counts_an_owners_files_and_bytes(tmp_path):
    store = LocalFileStore(tmp_path)
    assert store.usage("acme") == (0, 0)
    store.put("a.txt", b"12345", created_by="acme")
    entry = store.put("b.txt", b"678", created_by="acme")
    store.put("c.txt", b"9", created_by="other")
    assert store.usage("acme") == (2, 8)
    assert store.path(entry["id"], "other") is None and store.path("not-an-id", "acme") is None
