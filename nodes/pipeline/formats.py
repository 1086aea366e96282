"""How the Parser reads each file family with a well-kept library, into RAGFlow's output shapes.

Each reader takes the file's name, bytes and its family's setup and returns the Parser's outputs:
`output_format` and one of `json` (a list of items `{"text", "doc_type_kwd", ...}`), `markdown`,
`text` or `html`. Where RAGFlow's readers rely on DeepDoc's own code (the spreadsheet, slide, Markdown
and HTML readers), these are readers of the same kind on the libraries named beside each; where they
differ in what they find, docs/compatibility.md says so.
"""
from __future__ import annotations

import csv
import email
import email.policy
import io
import re
from typing import Any

from canvas2graph.nodes.pipeline.token_chunker import field_pattern, group_paragraphs

Outputs = dict[str, Any]


def _decode(data: bytes) -> str:
    for encoding in ("utf-8-sig", "gb18030", "latin-1"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    return data.decode("utf-8", errors="replace")


def _out(conf: dict, items: list[dict] | None = None, text: str | None = None, **extra: Any) -> Outputs:
    """The outputs for the family's output_format: JSON items, or the text (joined items)."""
    fmt = conf.get("output_format") or "json"
    out: Outputs = {"output_format": fmt, **extra}
    if fmt == "json":
        out["json"] = items if items is not None else [{"text": text, "doc_type_kwd": "text"}] if text else []
    else:
        out[fmt] = text if text is not None else "\n".join(i["text"] for i in items or [] if i.get("text"))
    return out


def text_and_code(name: str, data: bytes, conf: dict) -> Outputs:
    """RAGFlowTxtParser: split after each delimiter (kept), pieces grouped up to chunk_token_num."""
    text = _decode(data).replace("\r\n", "\n").replace("\r", "\n")
    pattern = field_pattern(conf.get("delimiter", "\n!?;。；！？"))
    parts = re.split(f"({pattern})", text) if pattern else [text]
    paragraphs = []
    for i, part in enumerate(parts):
        if not part or (pattern and re.fullmatch(pattern, part)):
            continue
        if i + 1 < len(parts) and pattern and re.fullmatch(pattern, parts[i + 1]):
            part += parts[i + 1]
        paragraphs.append(part)
    sections = ["\n".join(g) for g in group_paragraphs(paragraphs, int(conf.get("chunk_token_num", 128)))]
    return _out(conf, [{"text": s, "doc_type_kwd": "text"} for s in sections if s])


def markdown(name: str, data: bytes, conf: dict) -> Outputs:
    """markdown-it-py's blocks: each heading with the text under it a section; tables apart."""
    from markdown_it import MarkdownIt
    text = _decode(data)
    lines = text.splitlines()
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    sections: list[str] = []
    tables: list[str] = []
    current: list[str] = []
    flatten = bool(conf.get("flatten_media_to_text"))
    for tok in tokens:
        if tok.map is None or tok.level != 0 or tok.nesting == -1:
            continue
        block = "\n".join(lines[tok.map[0]:tok.map[1]]).strip()
        if not block:
            continue
        if tok.type == "table_open":
            tables.append(block)
        elif tok.type == "heading_open":
            if current:
                sections.append("\n".join(current))
            current = [block]
        else:
            current.append(block)
    if current:
        sections.append("\n".join(current))
    items = [{"text": s, "doc_type_kwd": "text"} for s in sections]
    items += [{"text": t, "doc_type_kwd": "text" if flatten else "table"} for t in tables]
    return _out(conf, items)


def html(name: str, data: bytes, conf: dict) -> Outputs:
    """BeautifulSoup: the visible text of each block element, scripts and styles dropped; blocks grouped
    up to chunk_token_num (512) tokens as RAGFlow's HtmlParser groups them."""
    from bs4 import BeautifulSoup
    soup = BeautifulSoup(_decode(data), "html.parser")
    for tag in soup(["script", "style", "noscript", "template"]):
        tag.decompose()
    if conf.get("remove_header_footer"):
        for tag in soup(["header", "footer", "nav"]):
            tag.decompose()
    blocks: list[str] = []
    for el in soup.find_all(["h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "pre", "td", "th", "caption", "dt", "dd",
                             "blockquote"]):
        if el.find_parent(["p", "li", "pre", "td", "th", "blockquote"]):
            continue
        text = re.sub(r"[ \t]+", " ", el.get_text(" ", strip=True))
        if text:
            blocks.append(text)
    if not blocks and soup.get_text(strip=True):
        blocks = [line.strip() for line in soup.get_text("\n").splitlines() if line.strip()]
    sections = ["\n".join(g) for g in group_paragraphs(blocks, int(conf.get("chunk_token_num", 512)))]
    return _out(conf, [{"text": s, "doc_type_kwd": "text"} for s in sections])


def docx(name: str, data: bytes, conf: dict) -> Outputs:
    """python-docx: paragraphs in order (headings as Markdown headings in markdown output), each table as
    an HTML table item; `file.outlines` lists the headings."""
    import docx as python_docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph
    document = python_docx.Document(io.BytesIO(data))
    items: list[dict] = []
    markdown_lines: list[str] = []
    outlines: list[list] = []
    flatten = bool(conf.get("flatten_media_to_text"))
    for child in document.element.body.iterchildren():
        tag = child.tag.rsplit("}", 1)[-1]
        if tag == "p":
            para = Paragraph(child, document)
            text = para.text.strip()
            if not text:
                continue
            style = (para.style.name if para.style is not None else "") or ""
            level = int(style.split()[-1]) if style.startswith("Heading") and style.split()[-1].isdigit() else 0
            if level:
                outlines.append([text, level, 0])
            items.append({"text": text, "image": None, "doc_type_kwd": "text"})
            markdown_lines.append(("#" * level + " " if level else "") + text)
        elif tag == "tbl":
            table = Table(child, document)
            rows = ["<tr>" + "".join(f"<td>{_escape(c.text)}</td>" for c in row.cells) + "</tr>" for row in table.rows]
            items.append({"text": "<table>" + "".join(rows) + "</table>", "image": None,
                          "doc_type_kwd": "text" if flatten else "table"})
            markdown_lines.append(_markdown_table([[c.text for c in row.cells] for row in table.rows]))
    file_out = {"outlines": outlines}
    if (conf.get("output_format") or "json") == "markdown":
        return {"output_format": "markdown", "markdown": "\n\n".join(markdown_lines), "file_outlines": file_out}
    return {"output_format": "json", "json": items, "file_outlines": file_out}


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _markdown_table(rows: list[list[str]]) -> str:
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    cells = [[c.replace("|", "\\|").replace("\n", " ") for c in r] + [""] * (width - len(r)) for r in rows]
    lines = ["| " + " | ".join(cells[0]) + " |", "|" + "---|" * width]
    lines += ["| " + " | ".join(r) + " |" for r in cells[1:]]
    return "\n".join(lines)


def pdf_plain_text(name: str, data: bytes, conf: dict) -> Outputs:
    """RAGFlow's `plain_text` method: pypdf's text, one item per line, no OCR and no positions."""
    from pypdf import PdfReader
    reader = PdfReader(io.BytesIO(data))
    items = []
    for page in reader.pages:
        for line in (page.extract_text() or "").split("\n"):
            items.append({"text": line, "layout_type": "text", "doc_type_kwd": "text"})
    if (conf.get("output_format") or "json") == "markdown":
        return {"output_format": "markdown", "markdown": "".join(i["text"] + "\n" for i in items),
                "pages": len(reader.pages)}
    return {"output_format": "json", "json": items, "pages": len(reader.pages)}


def spreadsheet(name: str, data: bytes, conf: dict) -> Outputs:
    """openpyxl (xlsx), xlrd (xls) or csv: each row as "header: value; ..." lines (json), one HTML table
    per sheet (html), or Markdown tables (markdown), as RAGFlow's ExcelParser writes them."""
    sheets = _sheets(name, data)
    fmt = conf.get("output_format") or "html"
    if fmt == "html":
        html_out = ""
        for title, rows in sheets:
            if not rows:
                continue
            head = "".join(f"<th>{_escape(str(c))}</th>" for c in rows[0])
            body = "".join("<tr>" + "".join(f"<td>{_escape(str(c))}</td>" for c in r) + "</tr>" for r in rows[1:])
            html_out += f"<table><caption>{_escape(title)}</caption><tr>{head}</tr>{body}</table>\n"
        return {"output_format": "html", "html": html_out}
    if fmt == "markdown":
        return {"output_format": "markdown", "markdown": "\n\n".join(_markdown_table([[str(c) for c in r] for r in rows])
                                                                   for _, rows in sheets if rows)}
    items = []
    for title, rows in sheets:
        header = [str(c) for c in rows[0]] if rows else []
        for row in rows[1:]:
            pairs = [f"{h}: {v}" for h, v in zip(header, row) if str(v).strip()]
            if pairs:
                items.append({"text": "; ".join(pairs) + (f" ——{title}" if len(sheets) > 1 else ""),
                              "doc_type_kwd": "text"})
    return {"output_format": "json", "json": items}


def _sheets(name: str, data: bytes) -> list[tuple[str, list[list[Any]]]]:
    suffix = name.rsplit(".", 1)[-1].lower()
    if suffix == "csv":
        rows = [r for r in csv.reader(io.StringIO(_decode(data))) if any(c.strip() for c in r)]
        return [(name, rows)]
    if suffix == "xls":
        import xlrd
        book = xlrd.open_workbook(file_contents=data)
        return [(s.name, [[c for c in s.row_values(i)] for i in range(s.nrows)]) for s in book.sheets()]
    import openpyxl
    book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    return [(ws.title, [["" if c is None else c for c in row] for row in ws.iter_rows(values_only=True)
                        if any(c is not None and str(c).strip() for c in row)]) for ws in book.worksheets]


def slides(name: str, data: bytes, conf: dict) -> Outputs:
    """python-pptx (the `ingest` extra): each slide's text frames and tables, one item per slide."""
    pptx = _optional("pptx", "python-pptx", "slides")
    deck = pptx.Presentation(io.BytesIO(data))
    items = []
    for slide in deck.slides:
        texts = []
        for shape in sorted(slide.shapes, key=lambda s: ((s.top or 0), (s.left or 0))):
            if shape.has_text_frame and shape.text_frame.text.strip():
                texts.append(shape.text_frame.text.strip())
            elif getattr(shape, "has_table", False) and shape.has_table:
                for row in shape.table.rows:
                    texts.append("; ".join(c.text for c in row.cells if c.text.strip()))
        if "\n".join(texts).strip():
            items.append({"text": "\n".join(texts), "doc_type_kwd": "text"})
    return {"output_format": "json", "json": items}


def epub(name: str, data: bytes, conf: dict) -> Outputs:
    """EbookLib (the `ingest` extra): each spine document's visible text."""
    _optional("ebooklib", "EbookLib", "EPUB")
    import ebooklib
    from bs4 import BeautifulSoup
    from ebooklib import epub as reader
    import tempfile
    with tempfile.NamedTemporaryFile(suffix=".epub") as tmp:     # EbookLib reads from a path
        tmp.write(data)
        tmp.flush()
        book = reader.read_epub(tmp.name, options={"ignore_ncx": True})
    sections = []
    for item in book.get_items_of_type(ebooklib.ITEM_DOCUMENT):
        text = BeautifulSoup(item.get_content(), "html.parser").get_text("\n")
        text = "\n".join(line.strip() for line in text.splitlines() if line.strip())
        if text:
            sections.append(text)
    return _out(conf, [{"text": s, "doc_type_kwd": "text"} for s in sections])


EMAIL_FIELDS = ["from", "to", "cc", "bcc", "date", "subject", "body", "attachments", "metadata"]


def email_message(name: str, data: bytes, conf: dict) -> Outputs:
    """The standard library's e-mail parser (.eml): the chosen header fields, the text body (HTML
    bodies as text) and the attachments' names."""
    if name.lower().endswith(".msg"):
        raise ValueError("Outlook .msg files need RAGFlow's extract_msg reader; save the message as .eml")
    msg = email.message_from_bytes(data, policy=email.policy.default)
    fields = conf.get("fields") or EMAIL_FIELDS
    content: dict[str, Any] = {}
    for key in ("from", "to", "cc", "bcc", "date", "subject"):
        if key in fields and msg.get(key) is not None:
            content[key] = str(msg.get(key))
    texts, htmls, attachments = [], [], []
    for part in msg.walk():
        if part.is_multipart():
            continue
        if part.get_filename():
            attachments.append(part.get_filename())
            continue
        if part.get_content_type() == "text/plain":
            texts.append(part.get_content())
        elif part.get_content_type() == "text/html":
            from bs4 import BeautifulSoup
            htmls.append(BeautifulSoup(part.get_content(), "html.parser").get_text("\n"))
    if "body" in fields:
        content["text"] = "\n".join(texts) or "\n".join(htmls)
    if "attachments" in fields:
        content["attachments"] = attachments
    if (conf.get("output_format") or "json") == "json":
        return {"output_format": "json", "json": [content]}
    lines = [f"{k}: {v}" for k, v in content.items() if k not in ("text", "attachments")]
    text = "\n".join(lines + ([content["text"]] if content.get("text") else []))
    return {"output_format": "text", "text": text}


def _optional(module: str, package: str, family: str):
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ValueError(f"reading {family} files needs the {package} package: "
                         "pip install 'canvas2graph[ingest]'") from None
