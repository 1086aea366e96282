"""RAGFlow's tokenizer, so query tokens are byte-identical to the tokens RAGFlow indexed (RETRIEVAL.md 4).

RAGFlow does not carry its tokenizer: `rag/nlp/rag_tokenizer.py` subclasses `RagTokenizer` from the
PyPI package infinity-sdk (0.7.3, as RAGFlow pins it). We run that same class. Its module is loaded
by file path rather than `import infinity.rag_tokenizer`, because importing the `infinity` package
pulls in its client stack (pyarrow, polars, thrift) that tokenizing never uses.

Two NLTK resources cannot be downloaded here, and RETRIEVAL.md 4.2 says how to do without them:
- punkt: the module's `word_tokenize` is swapped for `NLTKWordTokenizer().tokenize`, which gives the
  same tokens because every non-word character is already a space by then (one sentence only);
- WordNet (lemmas, and query synonyms): taken from Debian's `wordnet-base` + `wordnet-sense-index`
  (`/usr/share/wordnet`), copied once into an NLTK data folder with the `lexnames` file NLTK wants.
  Without it the tokenizer runs stem-only (about 3 % of English tokens then differ from RAGFlow's)
  and queries get no WordNet synonyms; `Tokenizer.lemmatizing` says which mode is on.
"""
from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

from canvas2graph.runtime.services.retrieval.protocol import RetrievalError

log = logging.getLogger(__name__)

DEBIAN_WORDNET = Path("/usr/share/wordnet")
WORDNET_FILES = ("adj.exc", "adv.exc", "cntlist.rev", "data.adj", "data.adv", "data.noun", "data.verb",
                 "index.adj", "index.adv", "index.noun", "index.sense", "index.verb", "noun.exc", "verb.exc")
# WordNet 3.0's 45 lexicographer files: number, name, part-of-speech number (NLTK reads `lexnames`).
LEXNAMES = ("adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute noun.body "
            "noun.cognition noun.communication noun.event noun.feeling noun.food noun.group noun.location "
            "noun.motive noun.object noun.person noun.phenomenon noun.plant noun.possession noun.process "
            "noun.quantity noun.relation noun.shape noun.state noun.substance noun.time verb.body verb.change "
            "verb.cognition verb.communication verb.competition verb.consumption verb.contact verb.creation "
            "verb.emotion verb.motion verb.perception verb.possession verb.social verb.stative verb.weather "
            "adj.ppl").split()
POS_NUMBER = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}


# True once a Tokenizer found no WordNet: it then tokenizes stem-only
STEM_ONLY = False


INSTALL_HINT = ("RAGFlow's tokenizer (what retrieval, indexing and ingestion split text with) comes with the "
                "retrieval extra, which is not installed: pip install 'canvas2graph[retrieval]' "
                "(in a checkout: pip install -e '.[retrieval]')")


class TokenizerUnavailable(RetrievalError):
    """RAGFlow's tokenizer (infinity-sdk, the `retrieval` extra) is not installed."""


def nltk_data_dir() -> Path:
    """Where our NLTK data lives: $CANVAS2GRAPH_NLTK_DATA, else ~/.cache/canvas2graph/nltk_data."""
    env = os.environ.get("CANVAS2GRAPH_NLTK_DATA")
    return Path(env) if env else Path.home() / ".cache" / "canvas2graph" / "nltk_data"


def _install_debian_wordnet(target: Path) -> bool:
    """Copy Debian's WordNet 3.0 files into `target/corpora/wordnet`; False when they are not installed."""
    if not all((DEBIAN_WORDNET / f).is_file() for f in WORDNET_FILES):
        return False
    dest = target / "corpora" / "wordnet"
    if (dest / "lexnames").is_file():
        return True
    tmp = dest.with_name(f"wordnet.tmp{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    for f in WORDNET_FILES:
        shutil.copyfile(DEBIAN_WORDNET / f, tmp / f)
    lines = [f"{i:02d}\t{name}\t{POS_NUMBER[name.split('.')[0]]}" for i, name in enumerate(LEXNAMES)]
    (tmp / "lexnames").write_text("\n".join(lines) + "\n")
    try:
        tmp.rename(dest)
    except OSError:              # another process got there first
        shutil.rmtree(tmp, ignore_errors=True)
    return (dest / "lexnames").is_file()


def _wordnet() -> Any:
    """A WordNet reader on our data folder (Debian's WordNet copied in once), or None without one."""
    import nltk
    target = nltk_data_dir()
    if str(target) not in nltk.data.path:
        nltk.data.path.insert(0, str(target))
    try:
        root = nltk.data.find("corpora/wordnet")
    except LookupError:
        if not _install_debian_wordnet(target):
            return None
        root = nltk.data.find("corpora/wordnet")
    from canvas2graph.runtime.services.retrieval.wordnet import WordNet30
    try:
        reader = WordNet30(root)
        return reader if reader.synsets("car") else None
    except Exception as e:          # a broken copy: run stem-only rather than fail every query
        log.warning("WordNet is present but unusable (%s); tokenizing stem-only", e)
        return None


def _load_module():
    spec = importlib.util.find_spec("infinity")     # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise TokenizerUnavailable(INSTALL_HINT)
    path = Path(list(spec.submodule_search_locations)[0]) / "rag_tokenizer.py"
    module_spec = importlib.util.spec_from_file_location("canvas2graph_rag_tokenizer", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    from nltk.tokenize import NLTKWordTokenizer
    module.word_tokenize = NLTKWordTokenizer().tokenize
    return module


class Tokenizer:
    """RAGFlow's RagTokenizer (English-stemmed and lemmatised, as RAGFlow's API server queries)."""

    def __init__(self) -> None:
        module = _load_module()
        self._wordnet = _wordnet()
        self.lemmatizing = self._wordnet is not None
        self._rt = module.RagTokenizer()
        if self.lemmatizing:
            from canvas2graph.runtime.services.retrieval.wordnet import lemmatizer
            self._rt.lemmatizer = lemmatizer(self._wordnet)
        else:
            global STEM_ONLY
            STEM_ONLY = True        # the command line explains it once, in words, when it is done
            self._rt._use_lemmatizer = False
            log.info("WordNet not found (install Debian's wordnet-base and wordnet-sense-index, or put NLTK's "
                        "wordnet under %s): tokenizing stem-only, about 3%% of English tokens differ from RAGFlow's",
                        nltk_data_dir())
        self._lock = threading.Lock()   # the tokenizer keeps no state per call, but datrie is not documented thread-safe

    def tokenize(self, text: str) -> str:
        with self._lock:
            return self._rt.tokenize(text)

    def fine_grained(self, tokens: str) -> str:
        with self._lock:
            return self._rt.fine_grained_tokenize(tokens)

    def freq(self, token: str) -> int:
        return self._rt.freq(token)

    def tag(self, token: str) -> str:
        return self._rt.tag(token)

    def normalize_text(self, text: str) -> str:
        """Full-width to half-width and traditional to simplified Chinese, as the query builder does."""
        return self._rt._tradi2simp(self._rt._strQ2B(text))

    def synonyms(self, token: str) -> list[str]:
        """WordNet synset head names of a lowercase word, without the word itself (RAGFlow's synonym lookup).

        RAGFlow takes them from a Python set, so which 8 it keeps varies between processes; we sort them
        so the query is the same on every run.
        """
        if not self.lemmatizing:
            return []
        names = {s.name().split(".")[0].replace("_", " ") for s in self._wordnet.synsets(token)}
        names.discard(token)
        return sorted(n for n in names if n)


_lock = threading.Lock()


@lru_cache(maxsize=1)
def _shared() -> Tokenizer:
    return Tokenizer()


def get_tokenizer() -> Tokenizer:
    """The process-wide tokenizer (loading the 54 MB dictionary trie takes about a second)."""
    with _lock:
        return _shared()
