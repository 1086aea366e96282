"""The tokenizer's WordNet reader answers what NLTK's own reader answers, without loading it all first."""
from __future__ import annotations

import os
import warnings

import pytest
from nltk.corpus.reader.wordnet import WordNetCorpusReader

from canvas2graph.runtime.services.retrieval.tokenizer import _wordnet, get_tokenizer
from canvas2graph.runtime.services.retrieval.wordnet import WordNet30, _index_line


@pytest.fixture(scope="module")
def readers() -> tuple[WordNet30, WordNetCorpusReader]:
    lazy = _wordnet()
    if lazy is None:
        msg = "WordNet is not installed (Debian wordnet-base + wordnet-sense-index)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    with warnings.catch_warnings():         # "multilingual functions are not available": not used here
        warnings.simplefilter("ignore", UserWarning)
        return lazy, WordNetCorpusReader(lazy.root, None)      # NLTK's reader, eager, on the same files


def test_every_lemma_finds_the_synsets_nltks_eager_map_holds(readers):
    lazy, eager = readers
    expected = eager._lemma_pos_offset_map
    assert set(lazy._lemma_pos_offset_map) == set(expected)
    for lemma, by_pos in expected.items():
        assert lazy._lemma_pos_offset_map[lemma] == by_pos, lemma
    assert "not-a-word-zz" not in lazy._lemma_pos_offset_map and lazy._lemma_pos_offset_map["not-a-word-zz"] == {}


def test_lemmas_and_synonyms_are_nltks(readers):
    lazy, eager = readers
    for word in ("churches", "running", "mice", "leaves", "criteria", "better", "charged", "us"):
        assert lazy._morphy(word, "n") == eager._morphy(word, "n") and lazy.morphy(word) == eager.morphy(word)
        assert [s.name() for s in lazy.synsets(word)] == [s.name() for s in eager.synsets(word)]
    assert [s.name() for s in lazy.synsets("beautiful", pos="s")] == [s.name() for s in eager.synsets("beautiful", pos="s")]


def test_the_tokenizer_lemmatizes_with_it():
    tokenizer = get_tokenizer()
    if tokenizer.lemmatizing:
        assert isinstance(tokenizer._wordnet, WordNet30)
        assert tokenizer.tokenize("the churches were running") == "the church were run"


def test_the_binary_search_finds_first_last_and_missing_words():
    data = b"  1 license line\n  2 another\nable a 1\nbook n 2\nzoo n 3"
    assert [_index_line(data, w) for w in (b"able", b"book", b"zoo", b"a", b"car", b"zz", b"", b" 1")] == \
        [b"able a 1", b"book n 2", b"zoo n 3", None, None, None, None, None]
