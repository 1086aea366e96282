"""RAGFlow's re-scoring of a search window, shared by every backend (RETRIEVAL.md 2.1, 3).

A backend fetches a window of candidate chunks (their stored fields) and, when a query vector
exists, each candidate's vector score `(1 + cos) / 2`. Everything after that happens here, the same
way for Elasticsearch and the embedded store, so switching backends changes only what the window
holds: token similarity, the hybrid weights, pagerank and tag features, the threshold, the page,
doc_aggs and the chunk dicts RAGFlow's `Dealer.retrieval` returns.
"""
from __future__ import annotations

import math
from collections import OrderedDict, defaultdict
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from canvas2graph.runtime.services.retrieval.query import TermWeights

# The stored fields a first pass reads (RETRIEVAL.md 1.3; Infinity's `row_id()` does not exist elsewhere).
SOURCE_FIELDS = ["docnm_kwd", "content_ltks", "kb_id", "img_id", "title_tks", "important_kwd", "position_int",
                 "doc_id", "chunk_order_int", "page_num_int", "top_int", "create_timestamp_flt",
                 "knowledge_graph_kwd", "question_kwd", "question_tks", "doc_type_kwd", "available_int",
                 "content_with_weight", "mom_id", "pagerank_fea", "tag_feas"]
PAGERANK = "pagerank_fea"
TAGS = "tag_feas"


def window_size(page_size: int, top: int, reranking: bool) -> int:
    """How many candidates one search fetches and re-scores (RAGFlow's RERANK_LIMIT)."""
    if page_size <= 1:
        return min(30, top) if reranking else 30
    size = math.ceil(64 / page_size) * page_size
    if reranking:
        size = min(size, math.ceil(top / page_size) * page_size)
    return max(size, 1)


def page_start(page: int, page_size: int, window: int) -> int:
    return ((page - 1) * page_size) % window if window else 0


@dataclass
class Candidate:
    """One chunk of the window: its id, stored fields and vector score (0 when none)."""
    id: str
    fields: dict[str, Any]
    vector_score: float = 0.0


def _tokens(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value if str(v)]
    return [t for t in str(value or "").split() if t]


def hybrid_token_list(fields: dict) -> list[str]:
    """The chunk side of token similarity without a reranker: distinct content tokens, then the title
    twice, keywords five times and question tokens six times (the repetition is RAGFlow's)."""
    content = list(OrderedDict.fromkeys(_tokens(fields.get("content_ltks"))))
    return (content + _tokens(fields.get("title_tks")) * 2 + _tokens(fields.get("important_kwd")) * 5
            + _tokens(fields.get("question_tks")) * 6)


def rerank_token_list(fields: dict) -> list[str]:
    """The chunk side with a reranker: content tokens as stored, the title and the keywords once."""
    return _tokens(fields.get("content_ltks")) + _tokens(fields.get("title_tks")) + _tokens(fields.get("important_kwd"))


def _keyed(tw: TermWeights, tokens: list[str]) -> dict[str, float]:
    """Token weights with 0.4 of each token and 0.6 of each adjacent pair (keyed by the two joined)."""
    d: dict[str, float] = defaultdict(float)
    weighted = tw.weights(tokens, preprocess=False)
    for i, (t, w) in enumerate(weighted):
        d[t] += 0.4 * w
        if i + 1 < len(weighted):
            t2, w2 = weighted[i + 1]
            d[t + t2] += 0.6 * max(w, w2)
    return d


def token_similarity(tw: TermWeights, keywords: list[str], chunk_tokens: Sequence[list[str]]) -> list[float]:
    """Share of the query's keyword weight found among each chunk's tokens and token pairs."""
    query = _keyed(tw, keywords)
    total = 1e-9 + sum(query.values())
    out = []
    for tokens in chunk_tokens:
        keys = set(tokens) | {a + b for a, b in zip(tokens, tokens[1:])}
        out.append((1e-9 + sum(v for k, v in query.items() if k in keys)) / total)
    return out


def rank_features(candidates: Sequence[Candidate], query_tags: dict[str, float] | None) -> list[float]:
    """pagerank_fea (always, when stored) plus 10 x the cosine between query tags and chunk tag_feas."""
    pageranks = [_float(c.fields.get(PAGERANK)) for c in candidates]
    if not query_tags:
        return pageranks
    q_norm = math.sqrt(sum(w * w for t, w in query_tags.items() if t != PAGERANK)) or 1e-9
    out = []
    for c, pr in zip(candidates, pageranks):
        tags = c.fields.get(TAGS) or {}
        norm = math.sqrt(sum(float(w) ** 2 for w in tags.values())) if isinstance(tags, dict) else 0
        dot = sum(query_tags[t] * float(w) for t, w in tags.items() if t in query_tags) if norm else 0
        out.append((dot / norm / q_norm if norm else 0.0) * 10 + pr)
    return out


def _float(value: Any) -> float:
    try:
        return float(value or 0)
    except (TypeError, ValueError):
        return 0.0


def normalise_rerank(scores: list[float]) -> list[float]:
    """Reranker scores as RAGFlow keeps them: as they are in [0, 1], else min-max scaled (clipped if flat)."""
    if not scores or all(0 <= s <= 1 for s in scores):
        return scores
    lo, hi = min(scores), max(scores)
    if hi - lo < 1e-3:
        return [min(1.0, max(0.0, s)) for s in scores]
    return [(s - lo) / (hi - lo) for s in scores]


@dataclass
class Scored:
    candidate: Candidate
    similarity: float
    term_similarity: float
    vector_similarity: float


def score(tw: TermWeights, keywords: list[str], candidates: Sequence[Candidate], vector_weight: float,
          query_tags: dict[str, float] | None = None, rerank_scores: list[float] | None = None) -> list[Scored]:
    """sim = (1 - vw) * tksim + vw * (vector score, or reranker score) + pagerank + 10 * tag similarity."""
    if rerank_scores is not None:
        tks = token_similarity(tw, keywords, [rerank_token_list(c.fields) for c in candidates])
        vs = normalise_rerank(list(rerank_scores))
    else:
        tks = token_similarity(tw, keywords, [hybrid_token_list(c.fields) for c in candidates])
        vs = [c.vector_score for c in candidates]
    ranks = rank_features(candidates, query_tags)
    return [Scored(c, (1 - vector_weight) * t + vector_weight * v + r, t, v)
            for c, t, v, r in zip(candidates, tks, vs, ranks)]


def chunk_dict(s: Scored) -> dict[str, Any]:
    """A chunk as RAGFlow's Dealer.retrieval returns it, without `vector` and `content_ltks` (the agent
    deletes both before anything sees them)."""
    f = s.candidate.fields
    return {"chunk_id": s.candidate.id, "content_with_weight": f.get("content_with_weight", ""),
            "doc_id": f.get("doc_id", ""), "docnm_kwd": f.get("docnm_kwd", ""), "kb_id": f.get("kb_id", ""),
            "important_kwd": list(f.get("important_kwd") or []), "tag_kwd": [], "image_id": f.get("img_id") or "",
            "similarity": float(s.similarity), "vector_similarity": float(s.vector_similarity),
            "term_similarity": float(s.term_similarity), "positions": list(f.get("position_int") or []),
            "doc_type_kwd": f.get("doc_type_kwd") or "", "mom_id": f.get("mom_id") or "", "row_id": None}


def select(scored: list[Scored], *, threshold: float, vector_weight: float, page: int, page_size: int,
           window: int) -> tuple[int, list[dict], list[dict]]:
    """(total passing, the page's chunk dicts, doc_aggs over every passing chunk)."""
    if vector_weight <= 0:
        threshold = 0.0             # RAGFlow drops the threshold when only tokens score
    ranked = sorted(scored, key=lambda s: -s.similarity)      # stable: ties keep window order
    passing = [s for s in ranked if s.similarity >= threshold]
    begin = page_start(page, page_size, window)
    page_items = passing[begin:begin + page_size]
    aggs: dict[str, dict] = {}
    for s in passing:
        name = s.candidate.fields.get("docnm_kwd", "")
        agg = aggs.setdefault(name, {"doc_name": name, "doc_id": s.candidate.fields.get("doc_id", ""), "count": 0})
        agg["count"] += 1
    doc_aggs = sorted(aggs.values(), key=lambda a: -a["count"])
    return len(passing), [chunk_dict(s) for s in page_items], doc_aggs


def with_parents(chunks: list[dict], parents: dict[str, dict]) -> list[dict]:
    """RAGFlow's retrieval_by_children: chunks with a `mom_id` give way to their parent chunk, whose
    similarity is the mean of its children's; the list is sorted again."""
    if not any(c.get("mom_id") for c in chunks):
        return chunks
    out: list[dict] = []
    groups: dict[str, list[dict]] = OrderedDict()
    for c in chunks:
        if c.get("mom_id") and c["mom_id"] in parents:
            groups.setdefault(c["mom_id"], []).append(c)
        else:
            out.append(c)
    for mom_id, children in groups.items():
        parent = dict(children[0])
        parent_fields = parents[mom_id]
        parent.update({"chunk_id": mom_id, "content_with_weight": parent_fields.get("content_with_weight", ""),
                       "mom_id": ""})
        for key in ("similarity", "vector_similarity", "term_similarity"):
            parent[key] = sum(c[key] for c in children) / len(children)
        out.append(parent)
    return sorted(out, key=lambda c: -c["similarity"])


def ids_of(candidates: Iterable[Candidate]) -> list[str]:
    return [c.id for c in candidates]
