"""`canvas2graph index`: read local files, chunk them and store RAGFlow's chunk fields.

Files: Markdown, plain text, HTML (text outside script/style) and PDF (pypdf, page by page). Chunks
are built as RAGFlow's naive parser builds them: paragraphs merged up to a token budget, then the
fields ingestion fills (`content_ltks`, `content_sm_ltks`, `title_tks`, ...) from RAGFlow's tokenizer.
A document's id comes from its dataset and path, and its content hash is stored: indexing an
unchanged file again does nothing, a changed one replaces its chunks.
"""
from __future__ import annotations

import hashlib
import re
import sys
import time
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Iterator

TEXT_SUFFIXES = {".md", ".markdown", ".txt", ".text"}
HTML_SUFFIXES = {".html", ".htm"}
PDF_SUFFIXES = {".pdf"}
SUFFIXES = TEXT_SUFFIXES | HTML_SUFFIXES | PDF_SUFFIXES
CHUNK_TOKENS = 512              # RAGFlow's default chunk_token_num
TITLE_WEIGHT = 0.1              # RAGFlow's filename_embd_weight
TABLE_TAGS = re.compile(r"</?(table|td|tr|th|caption)[^<>]*>", re.I)


class IndexError_(Exception):
    pass


@dataclass
class Section:
    text: str
    page: int | None = None


class _HTMLText(HTMLParser):
    BLOCKS = {"p", "div", "br", "li", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "section", "article", "pre"}

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style", "noscript"):
            self.skip += 1
        elif tag in self.BLOCKS:
            self.parts.append("\n\n")

    def handle_endtag(self, tag):
        if tag in ("script", "style", "noscript"):
            self.skip = max(0, self.skip - 1)
        elif tag in self.BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data):
        if not self.skip:
            self.parts.append(data)


def html_text(markup: str) -> str:
    """The visible text of an HTML page: outside script and style, blocks on lines of their own."""
    parser = _HTMLText()
    parser.feed(markup)
    return re.sub(r"[ \t]+", " ", "".join(parser.parts))


def read_sections(path: Path) -> list[Section]:
    suffix = path.suffix.lower()
    try:
        if suffix in TEXT_SUFFIXES:
            return [Section(path.read_text(encoding="utf-8", errors="replace"))]
        if suffix in HTML_SUFFIXES:
            return [Section(html_text(path.read_text(encoding="utf-8", errors="replace")))]
        if suffix in PDF_SUFFIXES:
            from pypdf import PdfReader
            reader = PdfReader(str(path))
            return [Section(page.extract_text() or "", i + 1) for i, page in enumerate(reader.pages)]
    except OSError as e:
        raise IndexError_(f"cannot read {path}: {e.strerror}") from None
    except Exception as e:          # a damaged PDF, say
        raise IndexError_(f"cannot read {path}: {type(e).__name__}: {e}") from None
    raise IndexError_(f"{path}: unsupported file type {suffix or '(none)'} (Markdown, text, HTML or PDF)")


def estimate_tokens(text: str) -> int:
    """About four characters per token (tiktoken's cl100k ranks cannot be downloaded here)."""
    return max(1, len(text) // 4)


def chunk_texts(sections: list[Section], budget: int = CHUNK_TOKENS) -> list[tuple[str, int | None]]:
    """Paragraphs merged in order until the next would pass the budget; a Markdown heading starts a chunk."""
    chunks: list[tuple[str, int | None]] = []
    for section in sections:
        current: list[str] = []
        size = 0
        for para in re.split(r"\n\s*\n", section.text):
            para = para.strip()
            if not para:
                continue
            n = estimate_tokens(para)
            heading = para.startswith("#")
            if current and (size + n > budget or heading):
                chunks.append(("\n\n".join(current), section.page))
                current, size = [], 0
            current.append(para)
            size += n
        if current:
            chunks.append(("\n\n".join(current), section.page))
    return chunks


def chunk_id(content: str, doc_id: str) -> str:
    """16 hex characters from the content and document, like RAGFlow's xxh64 ids (opaque either way)."""
    return hashlib.blake2b((content + doc_id).encode("utf-8"), digest_size=8).hexdigest()


def chunk_fields(tokenizer, *, content: str, doc_id: str, kb_id: str, doc_name: str, order: int,
                 page: int | None) -> dict:
    """The fields RAGFlow's ingestion writes for a chunk of a naive-parsed document."""
    title = tokenizer.tokenize(re.sub(r"\.[a-zA-Z0-9]+$", "", doc_name))
    content_ltks = tokenizer.tokenize(TABLE_TAGS.sub(" ", content))
    now = time.time()
    fields = {"id": chunk_id(content, doc_id), "doc_id": doc_id, "kb_id": kb_id, "docnm_kwd": doc_name,
              "title_tks": title, "title_sm_tks": tokenizer.fine_grained(title), "content_with_weight": content,
              "content_ltks": content_ltks, "content_sm_ltks": tokenizer.fine_grained(content_ltks),
              "important_kwd": [], "important_tks": "", "question_kwd": [], "question_tks": "",
              "available_int": 1, "chunk_order_int": order, "create_timestamp_flt": now,
              "create_time": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)), "img_id": "",
              "doc_type_kwd": ""}
    if page is not None:
        fields["page_num_int"] = [page]
        fields["position_int"] = []
    return fields


def expand(paths: list[str]) -> Iterator[tuple[Path, str]]:
    """(file, its name within what was given): a folder's files by relative path, a file by its name."""
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            for f in sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in SUFFIXES):
                yield f, f.relative_to(p).as_posix()
        elif p.is_file():
            yield p, p.name
        else:
            raise IndexError_(f"{raw}: no such file or folder")


def doc_id_for(kb_id: str, name: str) -> str:
    """Stable for the same dataset and name, wherever the files are checked out."""
    return hashlib.sha1(f"{kb_id}\n{name}".encode("utf-8")).hexdigest()[:32]


@dataclass
class IndexReport:
    indexed: int = 0
    unchanged: int = 0
    chunks: int = 0


async def index_files(store, paths: list[str], kb_id: str, *, embd_id: str | None = None,
                      progress: bool = True) -> IndexReport:
    """Chunk and store each file in the embedded `store`; unchanged files are skipped."""
    from tqdm import tqdm
    from canvas2graph.runtime.services.retrieval.tokenizer import get_tokenizer
    import asyncio

    files = list(expand(paths))
    if not files:
        raise IndexError_("no Markdown, text, HTML or PDF files found")
    store.ensure_dataset(kb_id, embd_id)
    embedder = store.models.embedder(embd_id) if embd_id else None
    tokenizer = None        # loaded for the first file that changed: re-indexing unchanged files costs nothing
    report = IndexReport()
    bar = tqdm(files, desc=f"indexing into {kb_id}", unit="file", disable=not progress, file=sys.stderr)
    for path, name in bar:
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        doc_id = doc_id_for(kb_id, name)
        if store.document_hash(doc_id) == digest:
            report.unchanged += 1
            continue
        texts = chunk_texts(read_sections(path))
        tokenizer = tokenizer or await asyncio.to_thread(get_tokenizer)
        fields = [chunk_fields(tokenizer, content=t, doc_id=doc_id, kb_id=kb_id, doc_name=path.name, order=i, page=pg)
                  for i, (t, pg) in enumerate(texts)]
        vectors = None
        if embedder is not None and texts:
            title_vec = (await embedder.embed_documents([path.name]))[0]
            body = await embedder.embed_documents([TABLE_TAGS.sub(" ", t) for t, _ in texts])
            vectors = [[TITLE_WEIGHT * a + (1 - TITLE_WEIGHT) * b for a, b in zip(title_vec, v)] for v in body]
        store.put_document(kb_id=kb_id, doc_id=doc_id, name=path.name, source=str(path.resolve()),
                           content_hash=digest, chunks=fields, vectors=vectors)
        report.indexed += 1
        report.chunks += len(fields)
        bar.set_postfix(chunks=report.chunks)
    return report
