"""The full-text half of a RAGFlow query: term weights and the `query_string` text (RETRIEVAL.md 3.2, 4.3).

`FulltextQuery.question()` turns a user question into what RAGFlow sends to Elasticsearch (the
boosted query text, its `minimum_should_match`) and the keyword list the Python re-scoring compares
chunks against. Term weights mix two idf priors, a named-entity factor and a part-of-speech factor
from the tokenizer's dictionary.

RAGFlow's `rag/res/ner.json` (entity types) and `synonym.json` (Chinese stock names and codes) are
RAGFlow data files; put them in a folder named by $CANVAS2GRAPH_RAGFLOW_RES to use them. Without
them entity factors are 1 and only WordNet synonyms apply, which changes weights of Chinese names only.
"""
from __future__ import annotations

import json
import logging
import math
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from canvas2graph.runtime.services.retrieval.tokenizer import Tokenizer, get_tokenizer

log = logging.getLogger(__name__)

QUERY_FIELDS = ["title_tks^10", "title_sm_tks^5", "important_kwd^30", "important_tks^20",
                "question_tks^20", "content_ltks^2", "content_sm_ltks"]

STOP_WORDS = set("请问 您 你 我 他 是 的 就 有 于 及 即 在 为 最 从 以 了 将 与 吗 吧 中 # 什么 怎么 哪个 哪些 啥 相关".split())
PUNCT_TOKEN = re.compile(r"[~—\t @#%!<>,\.\?\":;'\{\}\[\]_=\(\)\|，。？》•●○↓《；‘’：“”【¥ 】…￥！、·（）×`&\\/「」\\]")
NER_FACTOR = {"toxic": 2, "func": 1, "corp": 3, "loca": 3, "sch": 3, "stock": 3, "firstnm": 1}
# Words in Latin, Greek or Cyrillic script (with the dots, spaces and hyphens that join them).
ALPHABETIC = re.compile(r"[a-zA-Z\u00c0-\u024f\u0370-\u03ff\u0400-\u04ff. -]+$")

# rmWWW: question words and stop words a query does not need (English ones only before a space).
QUESTION_WORDS = [
    re.compile(r"是*(什么样的|哪家|一下|那家|请问|啥样|咋样了|什么时候|何时|何地|何人|是否|是不是|多少|哪里|怎么|哪儿|怎么样|如何"
               r"|哪些|是啥|啥是|啊|吗|呢|吧|咋|什么|有没有|呀|谁|哪位|哪个)是*", re.I),
    re.compile(r"(^| )(what|who|how|which|where|why)('re|'s)? ", re.I),
    re.compile(r"(^| )('s|'re|is|are|were|was|do|does|did|don't|doesn't|didn't|has|have|be|there|you|me|your|my|mine"
               r"|just|please|may|i|should|would|wouldn't|will|won't|done|go|for|with|so|the|a|an|by|i'm|it's|he's"
               r"|she's|they|they're|you're|as|by|on|in|at|up|out|down|of|to|or|and|if) ", re.I),
]
QUESTION_REPLACEMENT = ["", " ", " "]


def remove_question_words(text: str) -> str:
    original = text
    for pattern, repl in zip(QUESTION_WORDS, QUESTION_REPLACEMENT):
        text = pattern.sub(repl, text)
    return text or original


def escape(text: str) -> str:
    """query_string's special characters, escaped as RAGFlow escapes them."""
    return re.sub(r"([:\{\}/\[\]\-\*\"\(\)\|\+~\^])", r"\\\1", text).strip()


def looks_chinese(text: str) -> bool:
    """RAGFlow's path choice: 3 words or fewer, or mostly words that are not plain ASCII letters."""
    words = re.split(r"[ \t]+", text)
    if len(words) <= 3:
        return True
    return sum(not re.match(r"[a-zA-Z]+$", w) for w in words) / len(words) >= 0.7


def space_latin_and_cjk(text: str) -> str:
    text = re.sub(r"([A-Za-z]+[0-9]+)([\u4e00-\u9fa5]+)", r"\1 \2", text)
    text = re.sub(r"([A-Za-z])([\u4e00-\u9fa5]+)", r"\1 \2", text)
    text = re.sub(r"([\u4e00-\u9fa5]+)([A-Za-z]+[0-9]+)", r"\1 \2", text)
    return re.sub(r"([\u4e00-\u9fa5]+)([A-Za-z])", r"\1 \2", text)


def oov_prior(token: str) -> int:
    """The frequency RAGFlow assumes for a word its dictionary lacks: rarer the longer it is."""
    letters = sum(ch.isalpha() for ch in token)
    return max(10, round(300 / 2 ** (max(0, letters - 3) / 2)))


def idf(s: float, n: float) -> float:
    return math.log10(10 + (n - s + 0.5) / (s + 0.5))


@lru_cache(maxsize=1)
def ragflow_resources() -> tuple[dict, dict]:
    """(ner, synonyms) from $CANVAS2GRAPH_RAGFLOW_RES, or empty when not configured."""
    folder = os.environ.get("CANVAS2GRAPH_RAGFLOW_RES")
    loaded = []
    for name in ("ner.json", "synonym.json"):
        data: dict = {}
        if folder and (Path(folder) / name).is_file():
            try:
                data = json.loads((Path(folder) / name).read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                log.warning("cannot read %s: %s", Path(folder) / name, e)
        loaded.append(data if isinstance(data, dict) else {})
    return loaded[0], loaded[1]


class TermWeights:
    """RAGFlow's term weights: idf priors x entity factor x part-of-speech factor, normalised to sum 1."""

    def __init__(self, tokenizer: Tokenizer, ner: dict | None = None):
        self.tk = tokenizer
        self.ne = ner or {}

    def pretoken(self, text: str, num: bool = False, stop_words: bool = True) -> list[str]:
        out = []
        for t in self.tk.tokenize(text).split(" "):
            if (stop_words and t in STOP_WORDS) or (re.match(r"[0-9]$", t) and not num):
                continue
            if t and not PUNCT_TOKEN.match(t):
                out.append(t)
        return out

    @staticmethod
    def _one_term(t: str) -> bool:
        return len(t) == 1 or bool(re.match(r"[0-9a-z]{1,2}$", t))

    def token_merge(self, tks: list[str]) -> list[str]:
        """Join runs of one-character tokens (2 to 4 of them) into one term."""
        res, i = [], 0
        while i < len(tks):
            if i == 0 and self._one_term(tks[i]) and len(tks) > 1 and len(tks[i + 1]) > 1 \
                    and not re.match(r"[0-9a-zA-Z]", tks[i + 1]):
                res.append(" ".join(tks[0:2]))
                i = 2
                continue
            j = i
            while j < len(tks) and tks[j] and tks[j] not in STOP_WORDS and self._one_term(tks[j]):
                j += 1
            if j - i > 1:
                if j - i < 5:
                    res.append(" ".join(tks[i:j]))
                    i = j
                else:
                    res.append(" ".join(tks[i:i + 2]))
                    i += 2
            else:
                if tks[i]:
                    res.append(tks[i])
                i += 1
        return [t for t in res if t]

    def split(self, text: str) -> list[str]:
        """Split on spaces, keeping runs of Latin words together as one term."""
        terms: list[str] = []
        for t in re.sub(r"[ \t]+", " ", text).split(" "):
            if terms and re.match(r".*[a-zA-Z]$", terms[-1]) and re.match(r".*[a-zA-Z]$", t) \
                    and self.ne.get(t, "") != "func" and self.ne.get(terms[-1], "") != "func":
                terms[-1] = terms[-1] + " " + t
            else:
                terms.append(t)
        return terms

    def _ner(self, t: str) -> float:
        if re.match(r"[0-9,.]{2,}$", t):
            return 2
        if re.match(r"[a-z]{1,2}$", t):
            return 0.01
        return NER_FACTOR.get(self.ne.get(t, ""), 1) if t in self.ne else 1

    def _pos(self, t: str) -> float:
        tag = self.tk.tag(t)
        if tag in ("r", "c", "d"):
            return 0.3
        if tag in ("ns", "nt"):
            return 3
        if tag == "n":
            return 2
        if re.match(r"[0-9-]+", tag):
            return 2
        return 1

    def _parts(self, t: str) -> list[str]:
        return [p for p in self.tk.fine_grained(t).split(" ") if len(p) > 1]

    def _freq(self, t: str) -> float:
        if re.match(r"[0-9. -]{2,}$", t):
            return 3
        s: float = self.tk.freq(t)
        if not s and ALPHABETIC.match(t):
            return oov_prior(t)
        if not s and len(t) >= 4:
            parts = self._parts(t)
            s = min(self._freq(p) for p in parts) / 6.0 if len(parts) > 1 else 0
        return max(s, 10)

    def _df(self, t: str) -> float:
        if re.match(r"[0-9. -]{2,}$", t):
            return 5
        if ALPHABETIC.match(t):
            return oov_prior(t)
        if len(t) >= 4:
            parts = self._parts(t)
            if len(parts) > 1:
                return max(3, min(self._df(p) for p in parts) / 6.0)
        return 3

    def _raw(self, terms: list[str]) -> list[tuple[str, float]]:
        return [(t, (0.3 * idf(self._freq(t), 1e7) + 0.7 * idf(self._df(t), 1e9)) * self._ner(t) * self._pos(t))
                for t in terms]

    def weights(self, tks: list[str], preprocess: bool = True) -> list[tuple[str, float]]:
        if preprocess:
            raw = [pair for tk in tks for pair in self._raw(self.token_merge(self.pretoken(tk, True)))]
        else:
            raw = self._raw(tks)
        total = sum(w for _, w in raw)
        return [(t, w / total) for t, w in raw] if total else []


@dataclass
class QueryText:
    """What `question()` builds: the query_string text (None: nothing to match on), its msm and keywords."""
    text: str | None
    keywords: list[str]
    min_match: float | None = None       # None on the English path (ES then uses "0%")
    english: bool = True
    notes: list[str] = field(default_factory=list)

    def minimum_should_match(self) -> str | int:
        """The value the ES connector sends: "0%" without msm, "<n>%" for a positive msm, else 0."""
        if self.min_match is None:
            return "0%"
        return f"{int(self.min_match * 100)}%" if self.min_match else 0


class FulltextQuery:
    def __init__(self, tokenizer: Tokenizer | None = None):
        self.tk = tokenizer or get_tokenizer()
        ner, synonyms = ragflow_resources()
        self.tw = TermWeights(self.tk, ner)
        self.synonym_dict = synonyms

    def synonyms(self, token: str, topn: int = 8) -> list[str]:
        """RAGFlow's synonym lookup: its synonym dictionary first, then WordNet for plain words."""
        key = re.sub(r"[ \t]+", " ", token.strip())
        found = self.synonym_dict.get(key, [])
        if isinstance(found, str):
            found = [found]
        if found:
            return list(found)[:topn]
        if re.fullmatch(r"[a-z]+", token):
            return self.tk.synonyms(token)[:topn]
        return []

    def question(self, text: str, min_match: float = 0.3) -> QueryText:
        text = space_latin_and_cjk(text)
        text = re.sub(r"[ :|\r\n\t,，。？?/`!！&^%%()\[\]{}<>]+", " ", self.tk.normalize_text(text.lower())).strip()
        original = text
        text = remove_question_words(text)
        if not looks_chinese(text):
            return self._english(remove_question_words(text))
        return self._chinese(remove_question_words(text), original, min_match)

    def _english(self, text: str) -> QueryText:
        tks = self.tk.tokenize(text).split()
        keywords = [t for t in tks if t]
        weighted = [(re.sub(r"[ \\\"'^]", "", t), w) for t, w in self.tw.weights(tks, preprocess=False)]
        weighted = [(re.sub(r"^[a-z0-9]$", "", t), w) for t, w in weighted if t]
        weighted = [(re.sub(r"^[\+-]", "", t), w) for t, w in weighted if t]
        weighted = [(t.strip(), w) for t, w in weighted if t.strip()]
        parts = []
        for t, w in weighted[:256]:
            syns = [self.tk.tokenize(s) for s in self.synonyms(t)]
            syns = [s for s in syns if s.strip()]
            keywords.extend(syns)
            if not re.match(r"[.^+\(\)-]", t):
                parts.append("({}^{:.4f} {})".format(t, w, " ".join('"{}"^{:.4f}'.format(s, w / 4.0) for s in syns)))
        for (left, lw), (right, rw) in zip(weighted, weighted[1:]):
            parts.append('"%s %s"^%.4f' % (left, right, max(lw, rw) * 2))
        return QueryText(" ".join(parts) if parts else (text or None), keywords, None, True)

    def _chinese(self, text: str, original: str, min_match: float) -> QueryText:
        def needs_fine_grained(tk: str) -> bool:
            return len(tk) >= 3 and not re.match(r"[0-9a-z\.\+#_\*-]+$", tk)

        groups, keywords = [], []
        for term in self.tw.split(text)[:256]:
            if not term:
                continue
            keywords.append(term)
            weighted = self.tw.weights([term])
            term_syns = self.synonyms(term)
            if term_syns and len(keywords) < 32:
                keywords.extend(term_syns)
            parts = []
            for tk, w in sorted(weighted, key=lambda x: -x[1]):
                fine = self.tk.fine_grained(tk).split() if needs_fine_grained(tk) else []
                fine = [re.sub(r"[ ,\./;'\[\]\\`~!@#$%\^&\*\(\)=\+_<>\?:\"\{\}\|，。；‘’【】、！￥……（）——《》？：“”-]+", "", m)
                        for m in fine]
                fine = [m for m in (escape(m) for m in fine if len(m) > 1) if len(m) > 1]
                if len(keywords) < 32:
                    keywords.append(re.sub(r"[ \\\"']+", "", tk))
                    keywords.extend(fine)
                syns = [escape(s) for s in self.synonyms(tk)]
                if len(keywords) < 32:
                    keywords.extend(s for s in syns if s)
                syns = [self.tk.fine_grained(s) for s in syns if s]
                syns = [f'"{s}"' if " " in s.strip() else s for s in syns]
                if len(keywords) >= 32:
                    break
                tk = escape(tk)
                if " " in tk:
                    tk = f'"{tk}"'
                if syns:
                    tk = f"({tk} OR ({' '.join(syns)})^0.2)"
                if fine:
                    tk = f'{tk} OR "{" ".join(fine)}" OR ("{" ".join(fine)}"~2)^0.5'
                if tk.strip():
                    parts.append((tk, w))
            group = " ".join(f"({t})^{w}" for t, w in parts)
            if len(weighted) > 1:
                group += f' ("{self.tk.tokenize(term)}"~2)^1.5'
            syn_text = " OR ".join(f'"{self.tk.tokenize(escape(s))}"' for s in term_syns)
            if syn_text and group:
                group = f"({group})^5 OR ({syn_text})^0.7"
            groups.append(group)
        query = " OR ".join(f"({g})" for g in groups if g) or original
        if not groups:
            return QueryText(None, keywords, min_match, False)
        return QueryText(query, keywords, min_match, False)
