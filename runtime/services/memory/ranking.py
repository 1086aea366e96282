"""How a memory search scores messages: the share of the query's weighted terms a message holds (the term weights
and pair bonus of dataset retrieval, `retrieval/scoring.py`), mixed with the cosine of the query's and the message's
vectors when the memory has an embedding model, by `keywords_similarity_weight`."""
from __future__ import annotations

import functools
import math
import re
from typing import Sequence

_WORD = re.compile(r"\w+", re.UNICODE)


@functools.cache
def _term_weights():
    """RAGFlow's term weights over its tokenizer, or None where the tokenizer cannot load (no WordNet)."""
    try:
        from canvas2graph.runtime.services.retrieval.query import TermWeights
        from canvas2graph.runtime.services.retrieval.tokenizer import get_tokenizer
        return TermWeights(get_tokenizer())
    except Exception:       # noqa: BLE001 - TokenizerUnavailable and its causes: plain words then
        return None


def tokens(text: str) -> list[str]:
    """A text's search tokens (kept with each message, so a search tokenizes the query alone)."""
    tw = _term_weights()
    if tw is not None:
        return tw.pretoken(text)
    return [w.lower() for w in _WORD.findall(text)]


def text_scores(query: str, documents: Sequence[list[str]]) -> list[float]:
    keywords = tokens(query)
    if not keywords:
        return [0.0] * len(documents)
    tw = _term_weights()
    if tw is not None:
        from canvas2graph.runtime.services.retrieval.scoring import token_similarity
        return token_similarity(tw, keywords, documents)
    wanted = set(keywords)
    return [len(wanted & set(d)) / len(wanted) for d in documents]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


def rank(query: str, documents: Sequence[list[str]], vectors: Sequence[list[float] | None],
         query_vector: list[float] | None, keywords_weight: float) -> list[float]:
    """Each document's similarity in [0, 1]: text alone, or `keywords_weight` text + the rest vector."""
    text = text_scores(query, documents)
    if query_vector is None:
        return text
    out = []
    for t, v in zip(text, vectors):
        out.append(keywords_weight * t + (1 - keywords_weight) * (cosine(query_vector, v) if v else 0.0))
    return out


