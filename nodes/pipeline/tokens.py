"""Token counts as RAGFlow's chunkers count them: tiktoken's cl100k_base (common/token_utils.py).

The ranks file is not shipped with tiktoken and is downloaded on first use, which an offline machine
cannot do. It is used when it is already on this machine: `CANVAS2GRAPH_TIKTOKEN_FILE` (the
`cl100k_base.tiktoken` file itself), or tiktoken's own cache (`TIKTOKEN_CACHE_DIR`, where tiktoken keeps
it under the SHA-1 of its URL). Without it, or without the `tiktoken` package (the `ingest` extra),
tokens are estimated at four characters each, and `counter_name()` says so: chunk boundaries then
differ from RAGFlow's wherever a budget is reached (docs/compatibility.md).
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable

CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
_lock = threading.Lock()
_counter: tuple[str, Callable[[str], int]] | None = None


def _ranks_file() -> Path | None:
    explicit = os.environ.get("CANVAS2GRAPH_TIKTOKEN_FILE")
    if explicit:
        return Path(explicit) if Path(explicit).is_file() else None
    candidate = tiktoken_cache_file()
    return candidate if candidate.is_file() else None


def tiktoken_cache_file() -> Path:
    """Where tiktoken itself keeps the ranks file it downloads (its cache, named by the SHA-1 of the URL)."""
    cache = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR") \
        or os.path.join(tempfile.gettempdir(), "data-gym-cache")
    return Path(cache) / hashlib.sha1(CL100K_URL.encode()).hexdigest()


def _load() -> tuple[str, Callable[[str], int]]:
    try:
        import tiktoken  # noqa: F401
    except ImportError:
        return "estimate", _estimate
    path = _ranks_file()
    if path is None:
        return "estimate", _estimate
    encoding = _encoding()

    def count(text: str) -> int:
        try:
            return len(encoding.encode(text))
        except Exception:           # RAGFlow counts what tiktoken refuses (special tokens) as 0
            return 0
    return "cl100k_base", count


def _spec_without_download(factory) -> dict[str, Any]:
    """cl100k_base's pattern and special tokens, read from tiktoken's own definition without the
    download it starts (its ranks argument is replaced before it is fetched)."""
    import tiktoken_ext.openai_public as public
    original = public.load_tiktoken_bpe
    public.load_tiktoken_bpe = lambda *a, **k: {}
    try:
        return factory()
    finally:
        public.load_tiktoken_bpe = original


def _estimate(text: str) -> int:
    return (len(text) + 3) // 4 if text else 0


def _get() -> tuple[str, Callable[[str], int]]:
    global _counter
    if _counter is None:
        with _lock:
            if _counter is None:
                _counter = _load()
    return _counter


def count_tokens(text: str) -> int:
    """RAGFlow's num_tokens_from_string."""
    return _get()[1](text or "")


def counter_name() -> str:
    """"cl100k_base" when counts are RAGFlow's, "estimate" otherwise."""
    return _get()[0]


def reset() -> None:
    """Look for tiktoken's file again (after the environment changed, in tests)."""
    global _counter
    with _lock:
        _counter = None
        _encoding_cache.clear()


def truncate(text: str, max_tokens: int) -> str:
    """The first `max_tokens` tokens of `text` (RAGFlow's common.token_utils.truncate)."""
    name, _ = _get()
    if name == "estimate":
        return text[:max_tokens * 4]
    import tiktoken  # noqa: F401  (loaded by _get)
    encoding = _encoding()
    return encoding.decode(encoding.encode(text)[:max_tokens])


_encoding_cache: list = []


def _encoding():
    if not _encoding_cache:
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe
        from tiktoken_ext.openai_public import cl100k_base
        spec = dict(_spec_without_download(cl100k_base))
        spec["mergeable_ranks"] = load_tiktoken_bpe(str(_ranks_file()))
        _encoding_cache.append(tiktoken.Encoding(**spec))
    return _encoding_cache[0]
