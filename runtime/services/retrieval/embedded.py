"""The embedded retrieval store: RAGFlow's chunk fields in one SQLite file (RETRIEVAL.md 6.5).

Chunks keep the fields RAGFlow's indexes hold (`content_ltks`, `title_tks`, `docnm_kwd`, ...), so the
shared re-scoring treats them exactly as Elasticsearch hits. Text matching is an FTS5 index over the
seven token fields RAGFlow queries, ranked by FTS5's BM25 with RAGFlow's field boosts; vectors, when
a dataset has an embedding model, are float32 blobs compared by cosine. As on Elasticsearch, the
kNN candidates are the chunks that match the text, and the window is ranked by vector score first.
"""
from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from canvas2graph.runtime.services.retrieval.base import Page, Pass, ScoringBackend
from canvas2graph.runtime.services.retrieval.config import RetrievalConfig
from canvas2graph.runtime.services.retrieval.protocol import RetrievalError
from canvas2graph.runtime.services.retrieval.scoring import Candidate

FTS_FIELDS = ["content_ltks", "content_sm_ltks", "title_tks", "title_sm_tks", "important_kwd", "important_tks",
              "question_tks"]
FTS_BOOSTS = [2, 1, 10, 5, 30, 20, 20]      # RAGFlow's query_string field boosts, in FTS_FIELDS order

SCHEMA = """
CREATE TABLE IF NOT EXISTS kbs (id TEXT PRIMARY KEY, embd_id TEXT, created REAL);
CREATE TABLE IF NOT EXISTS documents (id TEXT PRIMARY KEY, kb_id TEXT NOT NULL, name TEXT NOT NULL,
    source TEXT, content_hash TEXT, chunk_count INTEGER, indexed_at REAL, meta_fields TEXT);
CREATE INDEX IF NOT EXISTS documents_kb ON documents (kb_id);
CREATE TABLE IF NOT EXISTS chunks (rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, kb_id TEXT NOT NULL,
    doc_id TEXT NOT NULL, available_int INTEGER, fields TEXT NOT NULL, vector BLOB, dims INTEGER);
CREATE INDEX IF NOT EXISTS chunks_kb_doc ON chunks (kb_id, doc_id);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5 (%s, tokenize = "unicode61 remove_diacritics 0 tokenchars '_.-'");
""" % ", ".join(FTS_FIELDS)

AVAILABLE = "(c.available_int IS NULL OR c.available_int >= 1)"


def _tokens_text(value: Any) -> str:
    return " ".join(str(v) for v in value) if isinstance(value, list) else str(value or "")


def _fts_phrase(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def match_expression(keywords: Iterable[str]) -> str | None:
    """The FTS5 query for a RAGFlow keyword list: any keyword (a phrase when it has several tokens)."""
    seen = []
    for k in keywords:
        k = " ".join(str(k).split())
        if k and k not in seen:
            seen.append(k)
    return " OR ".join(_fts_phrase(k) for k in seen) or None


class EmbeddedBackend(ScoringBackend):
    text_only_by_choice = True      # a dataset has vectors only when `index --embd-id` gave a model
    def __init__(self, path: str | Path, cfg: RetrievalConfig | None = None):
        super().__init__(cfg)
        self.path = Path(path).expanduser()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
            self.db.executescript(SCHEMA)
        except sqlite3.Error as e:
            raise RetrievalError(f"cannot open the retrieval store {self.path}: {e}") from None
        self.db.execute("PRAGMA journal_mode=WAL")
        self._lock = threading.Lock()

    def describe(self) -> str:
        from canvas2graph.runtime.services.retrieval.config import sqlite_url
        return sqlite_url(str(self.path))

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self.db.close()

    def _query(self, sql: str, args: Iterable[Any] = ()) -> list[tuple]:
        with self._lock:
            return self.db.execute(sql, tuple(args)).fetchall()

    async def _run(self, fn, *args):
        return await asyncio.to_thread(fn, *args)

    # --- datasets ---------------------------------------------------------------------------
    def datasets(self) -> list[dict]:
        rows = self._query("SELECT k.id, k.embd_id, COUNT(DISTINCT d.id), COALESCE(SUM(d.chunk_count), 0) FROM kbs k "
                           "LEFT JOIN documents d ON d.kb_id = k.id GROUP BY k.id ORDER BY k.id")
        return [{"id": r[0], "embd_id": r[1], "documents": r[2], "chunks": r[3]} for r in rows]

    async def embd_id(self, kb_ids: list[str]) -> str | None:
        stored = dict(self._query(f"SELECT id, embd_id FROM kbs WHERE id IN ({','.join('?' * len(kb_ids))})", kb_ids))
        missing = [kb for kb in kb_ids if kb not in stored]
        if missing and len(missing) == len(kb_ids):
            raise RetrievalError(f"dataset(s) {', '.join(missing)} not found in {self.describe()} "
                                 f"(index files with: canvas2graph index PATH --kb NAME)")
        ids = {self.cfg.embd_id_for(kb) or stored.get(kb) for kb in kb_ids if kb in stored}
        if len(ids) > 1:
            raise RetrievalError(f"the selected datasets use different embedding models "
                                 f"({', '.join(sorted(str(i) for i in ids))}); RAGFlow requires one model for all")
        return ids.pop() if ids else None

    # --- writing ----------------------------------------------------------------------------
    def ensure_dataset(self, kb_id: str, embd_id: str | None = None) -> None:
        with self._lock:
            row = self.db.execute("SELECT embd_id FROM kbs WHERE id = ?", (kb_id,)).fetchone()
            if row is None:
                self.db.execute("INSERT INTO kbs (id, embd_id, created) VALUES (?, ?, ?)", (kb_id, embd_id, time.time()))
            elif embd_id and row[0] and row[0] != embd_id:
                raise RetrievalError(f"dataset {kb_id} is embedded with {row[0]}, not {embd_id}; "
                                     f"use another --kb or the same model")
            elif embd_id and not row[0]:
                self.db.execute("UPDATE kbs SET embd_id = ? WHERE id = ?", (embd_id, kb_id))

    def document_hash(self, doc_id: str) -> str | None:
        row = self._query("SELECT content_hash FROM documents WHERE id = ?", (doc_id,))
        return row[0][0] if row else None

    def put_document(self, *, kb_id: str, doc_id: str, name: str, source: str, content_hash: str,
                     chunks: list[dict], vectors: list[list[float]] | None = None,
                     meta_fields: dict | None = None) -> None:
        """Replace a document's chunks in one transaction (chunks carry RAGFlow's fields, `id` included)."""
        with self._lock:
            cur = self.db.cursor()
            cur.execute("BEGIN")
            try:
                self._delete_document(cur, doc_id)
                seen: set[str] = set()
                for i, fields in enumerate(chunks):
                    if fields["id"] in seen:        # identical text twice in a document: one chunk, as in RAGFlow
                        continue
                    seen.add(fields["id"])
                    vec = vectors[i] if vectors else None
                    blob = np.asarray(vec, dtype=np.float32).tobytes() if vec is not None else None
                    cur.execute("INSERT INTO chunks (id, kb_id, doc_id, available_int, fields, vector, dims) "
                                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                                (fields["id"], kb_id, doc_id, fields.get("available_int"),
                                 json.dumps(fields, ensure_ascii=False), blob, len(vec) if vec is not None else None))
                    cur.execute(f"INSERT INTO chunks_fts (rowid, {', '.join(FTS_FIELDS)}) VALUES (?{', ?' * len(FTS_FIELDS)})",
                                (cur.lastrowid, *[_tokens_text(fields.get(f)) for f in FTS_FIELDS]))
                cur.execute("INSERT INTO documents (id, kb_id, name, source, content_hash, chunk_count, indexed_at, "
                            "meta_fields) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                            (doc_id, kb_id, name, source, content_hash, len(chunks), time.time(),
                             json.dumps(meta_fields or {}, ensure_ascii=False)))
                cur.execute("COMMIT")
            except BaseException:
                cur.execute("ROLLBACK")
                raise

    @staticmethod
    def _delete_document(cur: sqlite3.Cursor, doc_id: str) -> None:
        cur.execute("DELETE FROM chunks_fts WHERE rowid IN (SELECT rowid FROM chunks WHERE doc_id = ?)", (doc_id,))
        cur.execute("DELETE FROM chunks WHERE doc_id = ?", (doc_id,))
        cur.execute("DELETE FROM documents WHERE id = ?", (doc_id,))

    def add_chunks(self, kb_id: str, chunks: list[dict], embd_id: str | None = None) -> None:
        """Load chunks as RAGFlow stores them (fields plus an optional `q_<dim>_vec`), grouped by doc_id."""
        self.ensure_dataset(kb_id, embd_id)
        by_doc: dict[str, list[dict]] = {}
        for c in chunks:
            by_doc.setdefault(c["doc_id"], []).append(c)
        for doc_id, items in by_doc.items():
            vectors = [next((v for k, v in c.items() if k.startswith("q_") and k.endswith("_vec")), None) for c in items]
            fields = [{k: v for k, v in c.items() if not (k.startswith("q_") and k.endswith("_vec"))} for c in items]
            self.put_document(kb_id=kb_id, doc_id=doc_id, name=items[0].get("docnm_kwd", doc_id), source="",
                              content_hash="", chunks=fields,
                              vectors=vectors if any(v is not None for v in vectors) else None)

    # --- reading ----------------------------------------------------------------------------
    def _filters(self, kb_ids: list[str], doc_ids: list[str]) -> tuple[str, list[Any]]:
        sql = f"c.kb_id IN ({','.join('?' * len(kb_ids))}) AND {AVAILABLE}"
        args: list[Any] = list(kb_ids)
        if doc_ids:
            sql += f" AND c.doc_id IN ({','.join('?' * len(doc_ids))})"
            args += list(doc_ids)
        return sql, args

    def _search_sync(self, p: Pass) -> Page:
        where, args = self._filters(p.kb_ids, p.doc_ids)
        expr = match_expression(p.query.keywords) if p.query is not None else None
        if expr is not None:
            boosts = ", ".join(str(b) for b in FTS_BOOSTS)
            rows = self._query(f"SELECT c.rowid, c.id, c.dims FROM chunks_fts JOIN chunks c ON c.rowid = chunks_fts.rowid "
                               f"WHERE chunks_fts MATCH ? AND {where} ORDER BY bm25(chunks_fts, {boosts}), c.rowid",
                               [expr, *args])
        elif p.query is None and p.vector is None:
            total = self._query(f"SELECT COUNT(*) FROM chunks c WHERE {where}", args)[0][0]
            rows = self._query(f"SELECT c.rowid, c.id, c.dims FROM chunks c WHERE {where} ORDER BY c.rowid LIMIT ?",
                               [*args, p.size])
            return Page(total, self._candidates([r[0] for r in rows]))
        else:
            rows = self._query(f"SELECT c.rowid, c.id, c.dims FROM chunks c WHERE {where} ORDER BY c.rowid", args)
        if p.vector is None:
            return Page(len(rows), self._candidates([r[0] for r in rows[:p.size]]))
        # kNN over the text matches: the top k with cosine >= the cut-off score (1 + cos) / 2, ahead of the rest
        cos = self._cosines([r[0] for r in rows], p.vector)
        knn = sorted((i for i, r in enumerate(rows) if r[0] in cos and cos[r[0]] >= p.similarity),
                     key=lambda i: -cos[rows[i][0]])[:p.top_k]
        if expr is None:                 # kNN alone: only its hits
            order = knn
        else:
            in_knn = set(knn)
            order = knn + [i for i in range(len(rows)) if i not in in_knn]
        total = len(order)
        chosen = [rows[i][0] for i in order[:p.size]]
        return Page(total, self._candidates(chosen, {rid: (1 + cos[rid]) / 2 for rid in chosen if rid in cos}))

    def _cosines(self, rowids: list[int], vector: list[float]) -> dict[int, float]:
        q = np.asarray(vector, dtype=np.float32)
        qn = float(np.linalg.norm(q)) or 1e-9
        out: dict[int, float] = {}
        for start in range(0, len(rowids), 900):
            part = rowids[start:start + 900]
            rows = self._query(f"SELECT rowid, vector, dims FROM chunks WHERE rowid IN ({','.join('?' * len(part))}) "
                               f"AND vector IS NOT NULL", part)
            for rowid, blob, dims in rows:
                if dims != len(vector):
                    raise RetrievalError(f"wrong vector dimension: the embedding model gives {len(vector)} dimensions "
                                         f"but the stored chunks have {dims}")
                v = np.frombuffer(blob, dtype=np.float32)
                out[rowid] = float(v @ q) / ((float(np.linalg.norm(v)) or 1e-9) * qn)
        return out

    def _candidates(self, rowids: list[int], scores: dict[int, float] | None = None) -> list[Candidate]:
        if not rowids:
            return []
        rows = self._query(f"SELECT rowid, id, fields FROM chunks WHERE rowid IN ({','.join('?' * len(rowids))})", rowids)
        by_rowid = {r[0]: r for r in rows}
        return [Candidate(by_rowid[r][1], json.loads(by_rowid[r][2]), 0.0) for r in rowids if r in by_rowid]

    async def search(self, p: Pass) -> Page:
        return await self._run(self._search_sync, p)

    def _vector_scores_sync(self, ids: list[str], vector: list[float], kb_ids: list[str]) -> dict[str, float]:
        rows = self._query(f"SELECT rowid, id FROM chunks WHERE id IN ({','.join('?' * len(ids))}) "
                           f"AND kb_id IN ({','.join('?' * len(kb_ids))})", [*ids, *kb_ids])
        cos = self._cosines([r[0] for r in rows], vector)
        return {cid: (1 + cos[rid]) / 2 for rid, cid in rows if rid in cos and cos[rid] >= 0}

    async def vector_scores(self, ids: list[str], vector: list[float], kb_ids: list[str]) -> dict[str, float]:
        return await self._run(self._vector_scores_sync, ids, vector, kb_ids) if ids else {}

    async def fetch(self, ids: list[str], kb_ids: list[str]) -> dict[str, dict[str, Any]]:
        rows = self._query(f"SELECT id, fields FROM chunks WHERE id IN ({','.join('?' * len(ids))})", ids)
        return {r[0]: json.loads(r[1]) for r in rows}

    async def document_metadata(self, kb_ids: list[str]) -> dict[str, dict[str, list[str]]]:
        rows = self._query(f"SELECT id, meta_fields FROM documents WHERE kb_id IN ({','.join('?' * len(kb_ids))})", kb_ids)
        metas: dict[str, dict[str, list[str]]] = {}
        for doc_id, raw in rows:
            for key, value in (json.loads(raw or "{}") or {}).items():
                for v in value if isinstance(value, list) else [value]:
                    metas.setdefault(key, {}).setdefault(str(v), []).append(doc_id)
        return metas
