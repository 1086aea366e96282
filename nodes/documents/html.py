"""Markdown to a standalone HTML page: the content as markdown-it renders it (raw HTML escaped), with
the header, footer, timestamp and watermark around it, and page numbers when it is printed (CSS
paged media, which Chromium honours when saving as PDF)."""
from __future__ import annotations

from html import escape

from canvas2graph.nodes.documents.fonts import cjk_family
from canvas2graph.nodes.documents.layout import Layout, heading_size
from canvas2graph.nodes.documents.markdown import parser


def write_html(content: str, layout: Layout) -> str:
    size = layout.font_size
    body = parser().render(content)
    headings = "".join(f"h{n}{{font-size:{heading_size(size, n)}pt}}" for n in range(1, 7))
    page_number = ('@page{@bottom-right{content:"Page " counter(page);font-size:9pt;color:#595959}}'
                   if layout.page_numbers else "")
    css = (f'body{{font-family:"DejaVu Sans",Arial,"{cjk_family()}","Noto Sans CJK SC",sans-serif;'
           f"font-size:{size}pt;line-height:1.45;max-width:48em;margin:2em auto;padding:0 1em;color:#222}}"
           f"{headings}"
           "table{border-collapse:collapse}th,td{border:1px solid #999;padding:.25em .5em;vertical-align:top}"
           "th{background:#eee}pre{background:#f4f4f4;padding:.6em;overflow-x:auto}code{font-family:monospace}"
           "blockquote{border-left:3px solid #bbb;margin-left:0;padding-left:1em;color:#555}"
           ".doc-header,.doc-footer{font-size:9pt;color:#595959}.doc-header{border-bottom:1px solid #ddd;"
           "padding-bottom:.3em}.doc-footer{border-top:1px solid #ddd;padding-top:.3em;margin-top:2em;display:flex;"
           "justify-content:space-between}"
           ".doc-watermark{position:fixed;top:50%;left:50%;transform:translate(-50%,-50%) rotate(-45deg);"
           "font-size:48pt;color:rgba(153,153,153,.15);pointer-events:none;white-space:nowrap;z-index:1000}"
           f"{page_number}")
    parts = ["<!DOCTYPE html>", '<html><head><meta charset="utf-8">',
             '<meta name="generator" content="canvas2graph DocGenerator">',
             f"<title>{escape(layout.title)}</title><style>{css}</style></head><body>"]
    if layout.watermark:
        parts.append(f'<div class="doc-watermark" aria-hidden="true">{escape(layout.watermark)}</div>')
    if layout.header:
        parts.append(f'<header class="doc-header">{escape(layout.header)}</header>')
    parts.append(f"<main>\n{body}</main>")
    if layout.footer or layout.timestamp:
        parts.append(f'<footer class="doc-footer"><span>{escape(layout.footer)}</span>'
                     f"<span>{escape(layout.timestamp)}</span></footer>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
