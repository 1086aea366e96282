"""Documents from Markdown: PDF (reportlab), DOCX (python-docx), HTML, plain text and Markdown.

`render(fmt, content, layout)` returns the file's bytes. The content is parsed once into blocks
(`markdown.py`); each writer lays them out with the `Layout` (header, footer, watermark, page
numbers, timestamp, font size). Text formats carry the timestamp as their first line, as RAGFlow's do.
"""
from __future__ import annotations

from canvas2graph.nodes.documents.layout import Layout
from canvas2graph.nodes.documents.markdown import parse, strip_thinking

FORMATS = {
    "pdf": ("pdf", "application/pdf"),
    "docx": ("docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
    "txt": ("txt", "text/plain"),
    "markdown": ("md", "text/markdown"),
    "html": ("html", "text/html"),
}


def render(fmt: str, content: str, layout: Layout) -> bytes:
    if fmt == "pdf":
        from canvas2graph.nodes.documents.pdf import write_pdf
        return write_pdf(parse(content), layout)
    if fmt == "docx":
        from canvas2graph.nodes.documents.docx import write_docx
        return write_docx(parse(content), layout)
    if fmt == "html":
        from canvas2graph.nodes.documents.html import write_html
        return write_html(content, layout).encode("utf-8")
    if fmt == "txt":
        from canvas2graph.nodes.documents.text import write_text
        text = write_text(parse(content)) if content.strip() else ""
    elif fmt == "markdown":
        text = content.strip() + "\n" if content.strip() else ""
    else:
        raise ValueError(f"unsupported output format {fmt!r}")
    if layout.timestamp:
        text = f"{layout.timestamp}\n\n{text}" if text else f"{layout.timestamp}\n"
    # a text file always ends its (maybe only) line: empty content gives "\n", as RAGFlow's pandoc does
    return (text or "\n").encode("utf-8")


__all__ = ["FORMATS", "Layout", "render", "strip_thinking"]
