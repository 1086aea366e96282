"""What a component reads of an uploaded file: its text, or the image itself (RAGFlow's `FileService.get_files`).

RAGFlow hands a run its uploads (Begin and UserFillUp file fields, `sys.files`, webhook file parts) as
parsed content: an image becomes a `data:<mime>;base64,...` URI (which the LLM sends as an image), any
other file a text that starts with a short header naming the file. This module builds the same from a
file's bytes: PDF (pypdf), Word (python-docx), spreadsheets (every sheet as a Markdown table), HTML (its
visible text) and text files; other kinds (audio, video, presentations) get the header and a line
saying their content is not read here.
"""
from __future__ import annotations

import base64
import io
import json
from pathlib import PurePosixPath
from typing import Any

from canvas2graph.runtime.services.files import CONTENT, FileStore, LoadedFile, is_file_entry, load_files

HEADER = "\n -----------------\nFile: {name}\nContent as following: \n"
SPREADSHEETS = {".xlsx", ".xlsm", ".xls", ".csv"}
TEXT_TYPES = ("text/", "application/json", "application/xml", "application/x-yaml", "application/javascript")
# files RAGFlow reads as text (its "doc" types that are plain text underneath)
TEXT_SUFFIXES = {".txt", ".md", ".mdx", ".markdown", ".json", ".jsonl", ".ldjson", ".yml", ".yaml", ".xml", ".ini",
                 ".py", ".js", ".ts", ".java", ".c", ".cpp", ".h", ".php", ".go", ".sh", ".cs", ".kt", ".sql", ".eml"}
MAX_SHEET_ROWS = 10_000          # rows of one sheet put into the text (a huge sheet is for ExcelProcessor)


def file_content(file: LoadedFile) -> str:
    """The file as RAGFlow hands it to components: a data URI for an image, else the header and the text."""
    if file.mime_type.startswith("image/"):
        return f"data:{file.mime_type};base64,{base64.b64encode(file.data).decode('ascii')}"
    return HEADER.format(name=file.name) + file_text(file)


def file_text(file: LoadedFile) -> str:
    """The text of a document; a file that cannot be read says why instead (the run goes on)."""
    suffix = PurePosixPath(file.name).suffix.lower()
    try:
        if suffix == ".pdf" or file.mime_type == "application/pdf":
            return _pdf(file.data)
        if suffix == ".docx":
            return _docx(file.data)
        if suffix in SPREADSHEETS:
            return _spreadsheet(file.data, suffix)
        if suffix in (".html", ".htm") or file.mime_type == "text/html":
            from canvas2graph.runtime.services.retrieval.indexing import html_text
            return html_text(_decode(file.data))
        if suffix in TEXT_SUFFIXES or file.mime_type.startswith(TEXT_TYPES):
            return _decode(file.data)
    except Exception as e:          # a damaged file: the component still runs, and the text says what happened
        return f"(the content of {file.name} cannot be read: {type(e).__name__}: {e})"
    return f"(the content of {file.name} is not read here: {file.mime_type} files have no text reader)"


def _decode(data: bytes) -> str:
    for encoding in ("utf-8-sig", "gb18030"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    return data.decode("utf-8", errors="replace")


def _pdf(data: bytes) -> str:
    from pypdf import PdfReader
    reader = PdfReader(io.BytesIO(data))
    return "\n".join((page.extract_text() or "").strip() for page in reader.pages).strip()


def _docx(data: bytes) -> str:
    import docx
    document = docx.Document(io.BytesIO(data))
    parts = [p.text for p in document.paragraphs if p.text.strip()]
    for table in document.tables:
        rows = [[cell.text.strip() for cell in row.cells] for row in table.rows]
        if rows:
            parts.append(_markdown_table(rows[0], rows[1:]))
    return "\n".join(parts)


def _spreadsheet(data: bytes, suffix: str) -> str:
    import pandas as pd
    if suffix == ".csv":
        sheets = {"": pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False)}
    else:
        engine = "xlrd" if suffix == ".xls" else "openpyxl"
        sheets = pd.read_excel(io.BytesIO(data), sheet_name=None, dtype=str, engine=engine, keep_default_na=False)
    parts = []
    for name, frame in sheets.items():
        rows = frame.head(MAX_SHEET_ROWS).values.tolist()
        table = _markdown_table([str(c) for c in frame.columns], rows)
        more = f"\n({len(frame) - MAX_SHEET_ROWS} more rows)" if len(frame) > MAX_SHEET_ROWS else ""
        parts.append((f"Sheet: {name}\n" if name else "") + table + more)
    return "\n\n".join(parts)


def _markdown_table(header: list, rows: list[list]) -> str:
    def cell(value) -> str:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        return text.replace("|", "\\|").replace("\n", " ")
    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def with_contents(value: Any, store: FileStore, tenant: str | None = None) -> Any:
    """`value` (an entry, a list of them, or anything else) with each file entry given its `content`:
    what RAGFlow hands components in its place. Entries that have one keep it (a file is read once per
    turn that brings it); other values are left as they are. FileStoreError for an unknown id or another
    tenant's file."""
    if isinstance(value, list):
        return [with_contents(item, store, tenant) for item in value]
    if is_file_entry(value) and CONTENT not in value:
        [loaded] = load_files(value, store, tenant)
        return {**value, CONTENT: file_content(loaded)}
    return value
