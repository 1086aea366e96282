"""WordNet for RAGFlow's tokenizer, opened in a few milliseconds instead of seconds.

NLTK's `WordNetCorpusReader` reads every index file into a dict when it opens (0.7 s of CPU), scans
the adjective data for satellites (0.1 s) and, since NLTK 3.9, maps the WordNet it opened onto
"wordnet" for its multilingual data, reading `index.sense` twice (most of the rest). The tokenizer
looks up a handful of words per query, so `WordNet30` finds each word when it is asked for, by
binary search in the sorted index files (WordNet's own lookup), finds satellites only when an
adjective is asked for, and maps nothing: our copy is WordNet 3.0, the version that data is keyed by,
and the tokenizer reads no multilingual data. Lookups answer exactly what NLTK's eager maps hold
(tests/runtime/services/retrieval/test_wordnet.py compares every lemma).
"""
from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from typing import Any

from nltk.corpus.reader.wordnet import ADJ, ADJ_SAT, WordNetCorpusReader, WordNetError
from nltk.stem import WordNetLemmatizer


def _index_line(data: bytes, key: bytes) -> bytes | None:
    """The line of a sorted WordNet index file whose first word is `key` (the license lines, which
    start with spaces, sort first)."""
    if not key or key.startswith(b" "):
        return None
    lo, hi = 0, len(data)
    while lo < hi:
        mid = (lo + hi) // 2
        start = data.rfind(b"\n", 0, mid) + 1
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        word = b"" if data.startswith(b" ", start) else data[start:end].split(b" ", 1)[0]
        if word < key:
            lo = end + 1
        elif word > key:
            hi = start
        else:
            return data[start:end]
    return None


def _offsets(line: str, where: str) -> tuple[str, list[int]]:
    """The part of speech and synset offsets of an index line, read as NLTK reads them."""
    fields = line.split()
    try:
        pos, n_synsets, n_pointers = fields[1], int(fields[2]), int(fields[3])
        first = 4 + n_pointers + 2          # past the pointer symbols, sense_cnt and tagsense_cnt
        offsets = [int(f) for f in fields[first:first + n_synsets]]
        if n_synsets < 1 or len(offsets) != n_synsets:
            raise ValueError(f"{n_synsets} synsets announced, {len(offsets)} found")
    except (IndexError, ValueError) as e:
        raise WordNetError(f"{where}: {e}") from e
    return pos, offsets


class _LazyIndex(Mapping):
    """`_lemma_pos_offset_map` (lemma -> pos -> synset offsets), read from the index files on demand."""

    def __init__(self, reader: WordNet30) -> None:
        self._reader = reader
        self._files = {suffix: reader.root.join(f"index.{suffix}").open().read()
                       for suffix in reader._FILEMAP.values()}
        self._found: dict[str, dict[str, list[int]]] = {}

    def _lookup(self, lemma: str) -> dict[str, list[int]]:
        found = self._found.get(lemma)
        if found is None:
            found = {}
            key = lemma.encode("utf-8")
            for suffix, data in self._files.items():
                line = _index_line(data, key)
                if line is None:
                    continue
                pos, offsets = _offsets(line.decode("utf-8"), f"index.{suffix}, lemma {lemma!r}")
                found[pos] = offsets
                if pos == ADJ:          # as NLTK: the satellites among an adjective's synsets
                    satellites = self._reader.satellite_offsets
                    found[ADJ_SAT] = [o for o in offsets if o in satellites]
            self._found[lemma] = found
        return found

    def __getitem__(self, lemma: str) -> dict[str, list[int]]:
        return self._lookup(lemma)      # {} for an unknown lemma, as NLTK's defaultdict answers

    def __contains__(self, lemma: object) -> bool:
        return isinstance(lemma, str) and bool(self._lookup(lemma))

    def __iter__(self) -> Iterator[str]:   # all lemma names: only NLTK's rarely used listings need it
        for data in self._files.values():
            for line in data.decode("utf-8").splitlines():
                if line and not line.startswith(" "):
                    yield line.split(" ", 1)[0]

    def __len__(self) -> int:
        return sum(1 for _ in self)


class WordNet30(WordNetCorpusReader):
    """NLTK's WordNet reader with lazy lookups and no version mapping (see the module's docstring)."""

    def __init__(self, root: Any) -> None:
        with warnings.catch_warnings():     # "multilingual functions are not available": we use none
            warnings.simplefilter("ignore", UserWarning)
            super().__init__(root, None)

    def _scan_satellites(self) -> None:
        self._satellites: set[int] | None = None        # found on the first adjective lookup

    @property
    def satellite_offsets(self) -> set[int]:
        if self._satellites is None:
            super()._scan_satellites()      # sets self.satellite_offsets: the setter below keeps it
        return self._satellites

    @satellite_offsets.setter
    def satellite_offsets(self, value: set[int]) -> None:
        self._satellites = value

    def _load_lemma_pos_offset_map(self) -> None:
        self._lemma_pos_offset_map = _LazyIndex(self)

    def map_wn(self, version: str = "wordnet") -> None:
        return None


def lemmatizer(reader: WordNetCorpusReader) -> WordNetLemmatizer:
    """NLTK's WordNetLemmatizer (the one RagTokenizer makes), on `reader` instead of nltk.corpus.wordnet."""

    class Lemmatizer(WordNetLemmatizer):
        def _morphy(self, form, pos, check_exceptions=True):
            return reader._morphy(form, pos, check_exceptions)

        def morphy(self, form, pos=None, check_exceptions=True):
            return reader.morphy(form, pos, check_exceptions)

    return Lemmatizer()
