"""The re-scoring after a search: window, hybrid weights, pagerank, threshold, page, doc_aggs, parents."""
from __future__ import annotations

import pytest

from canvas2graph.runtime.services.retrieval.metadata import doc_filter
from canvas2graph.runtime.services.retrieval.query import FulltextQuery
from canvas2graph.runtime.services.retrieval.scoring import Candidate, normalise_rerank, score, select, window_size, with_parents


@pytest.fixture(scope="module")
def tw():
    return FulltextQuery().tw


@pytest.mark.parametrize("page_size, top, rerank, size", [
    (8, 1024, False, 64), (5, 1024, False, 65), (1, 1024, False, 30), (8, 20, True, 24), (1, 10, True, 10)])
def test_window_size(page_size, top, rerank, size):
    assert window_size(page_size, top, rerank) == size


def cand(cid, doc, content, vs=0.0, **fields):
    return Candidate(cid, {"content_ltks": content, "docnm_kwd": doc, "doc_id": doc + "-id", "kb_id": "kb",
                           "content_with_weight": content.upper(), **fields}, vs)


def test_hybrid_score_adds_pagerank_and_applies_threshold_page_and_doc_aggs(tw):
    cands = [cand("a", "x.md", "refund", 0.9), cand("b", "y.md", "ship", 0.55), cand("c", "x.md", "ship", 0.5),
             cand("d", "y.md", "ship", 0.0, pagerank_fea="10")]
    scored = score(tw, ["refund"], cands, 0.5)
    sims = {s.candidate.id: s.similarity for s in scored}
    assert sims["a"] == pytest.approx(0.5 * 1.0 + 0.5 * 0.9, abs=1e-6)   # "refund" is all the query weight
    assert sims["b"] == pytest.approx(0.5 * 0.55)
    assert sims["d"] == pytest.approx(10.0)                                # pagerank 10 always wins
    total, page, aggs = select(scored, threshold=0.26, vector_weight=0.5, page=1, page_size=2, window=64)
    assert total == 3 and [c["chunk_id"] for c in page] == ["d", "a"]     # c (0.25) is under the threshold
    assert aggs == [{"doc_name": "y.md", "doc_id": "y.md-id", "count": 2},
                    {"doc_name": "x.md", "doc_id": "x.md-id", "count": 1}]
    assert page[1]["content_with_weight"] == "REFUND" and page[1]["term_similarity"] == pytest.approx(1.0)
    assert "vector" not in page[0] and "content_ltks" not in page[0]


def test_no_vector_weight_means_no_threshold(tw):
    scored = score(tw, ["refund"], [cand("a", "x.md", "ship")], 0.0)
    total, page, _ = select(scored, threshold=0.2, vector_weight=0.0, page=1, page_size=8, window=64)
    assert total == 1 and page[0]["similarity"] == pytest.approx(0.0, abs=1e-6)


def test_children_give_way_to_their_parent_with_the_mean_similarity():
    chunks = [{"chunk_id": "c1", "mom_id": "p", "similarity": 0.9, "vector_similarity": 0.8, "term_similarity": 1.0,
               "content_with_weight": "child one"},
              {"chunk_id": "x", "mom_id": "", "similarity": 0.8, "vector_similarity": 0.8, "term_similarity": 0.8,
               "content_with_weight": "other"},
              {"chunk_id": "c2", "mom_id": "p", "similarity": 0.5, "vector_similarity": 0.4, "term_similarity": 0.6,
               "content_with_weight": "child two"}]
    out = with_parents(chunks, {"p": {"content_with_weight": "the whole section"}})
    assert [(c["chunk_id"], c["content_with_weight"]) for c in out] == [("x", "other"), ("p", "the whole section")]
    assert out[1]["similarity"] == pytest.approx(0.7)


def test_rerank_scores_outside_unit_range_are_min_max_scaled():
    assert normalise_rerank([0.2, 0.9]) == [0.2, 0.9]
    assert normalise_rerank([-2.0, 0.0, 2.0]) == [0.0, 0.5, 1.0]
    assert normalise_rerank([3.0, 3.0005]) == [1.0, 1.0]


def test_manual_metadata_filter():
    metas = {"author": {"Ann": ["d1"], "Bob": ["d2"]}, "year": {"2023": ["d1"], "2024": ["d2", "d3"]}}
    assert doc_filter(metas, [{"key": "year", "op": "≥", "value": "2024"}]) == ["d2", "d3"]
    assert doc_filter(metas, [{"key": "year", "op": ">", "value": "2020"},
                              {"name": "author", "comparison_operator": "is", "value": "ann"}]) == ["-999"]
    assert doc_filter(metas, [{"key": "author", "op": "contains", "value": "b"},
                              {"key": "year", "op": "=", "value": 2023}], "or") == ["d1", "d2"]
    assert doc_filter(metas, []) == []
