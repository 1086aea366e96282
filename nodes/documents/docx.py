"""Markdown blocks to DOCX with python-docx.

Styles carry the font size (Normal) and RAGFlow's heading sizes; East Asian text is given the CJK
font family (`fonts.cjk_family`). Every section's header holds the header text and the watermark (a
rotated light-grey text shape, the way Word draws its own watermarks); the footer holds the footer
text, the timestamp after a centred tab and a PAGE field after a right tab, as RAGFlow lays them out.
"""
from __future__ import annotations

import io
from xml.sax.saxutils import escape

from docx import Document
from docx.enum.text import WD_ALIGN_PARAGRAPH, WD_TAB_ALIGNMENT
from docx.opc.constants import RELATIONSHIP_TYPE
from docx.oxml import OxmlElement, parse_xml
from docx.oxml.ns import qn
from docx.shared import Pt, RGBColor

from canvas2graph.nodes.documents.fonts import cjk_family
from canvas2graph.nodes.documents.layout import Layout, heading_size
from canvas2graph.nodes.documents.markdown import Block, Code, Heading, ListBlock, Paragraph, Quote, Rule, Span, Table

MONO = "Courier New"


def write_docx(blocks: list[Block], layout: Layout) -> bytes:
    document = Document()
    _styles(document, layout.font_size)
    document.core_properties.title = layout.title
    document.core_properties.author = "canvas2graph"
    for block in blocks:
        _block(document, block, level=0)
    for section in document.sections:
        _decorate(section, layout)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def _styles(document, size: int) -> None:
    east_asian = cjk_family()
    for name, points in [("Normal", size)] + [(f"Heading {n}", heading_size(size, n)) for n in range(1, 7)]:
        try:
            style = document.styles[name]
        except KeyError:
            continue
        style.font.size = Pt(points)
        fonts = style.element.get_or_add_rPr().get_or_add_rFonts()
        fonts.set(qn("w:eastAsia"), east_asian)


def _block(container, block: Block, level: int, style: str | None = None) -> None:
    if isinstance(block, Heading):
        paragraph = container.add_heading("", level=min(block.level, 6))
        _runs(paragraph, block.spans)
    elif isinstance(block, Paragraph):
        _runs(container.add_paragraph(style=style), block.spans)
    elif isinstance(block, Code):
        paragraph = container.add_paragraph(style=style)
        lines = block.text.splitlines() or [""]
        for n, line in enumerate(lines):
            run = paragraph.add_run(line)
            run.font.name = MONO
            if n < len(lines) - 1:
                run.add_break()
    elif isinstance(block, ListBlock):
        base = "List Number" if block.ordered else "List Bullet"
        list_style = base if level == 0 else f"{base} {min(level + 1, 3)}"
        for item in block.items:
            first, *rest = item or [Paragraph([])]
            if isinstance(first, Paragraph):
                _runs(container.add_paragraph(style=list_style), first.spans)
            else:
                _block(container, first, level + 1, list_style)
            for inner in rest:
                _block(container, inner, level + 1)
    elif isinstance(block, Quote):
        for inner in block.blocks:
            _block(container, inner, level, "Quote")
    elif isinstance(block, Table):
        _table(container, block)
    elif isinstance(block, Rule):
        _rule(container.add_paragraph())


def _runs(paragraph, spans: list[Span]) -> None:
    for span in spans:
        if span.link:
            _hyperlink(paragraph, span)
            continue
        parts = span.text.split("\n")
        for n, part in enumerate(parts):
            run = paragraph.add_run(part)
            _format(run, span)
            if n < len(parts) - 1:
                run.add_break()


def _format(run, span: Span) -> None:
    run.bold = span.bold or None
    run.italic = span.italic or None
    if span.strike:
        run.font.strike = True
    if span.code:
        run.font.name = MONO


def _hyperlink(paragraph, span: Span) -> None:
    """A clickable link: python-docx has no API for it, so the run goes in a w:hyperlink element."""
    rel = paragraph.part.relate_to(span.link, RELATIONSHIP_TYPE.HYPERLINK, is_external=True)
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), rel)
    run = paragraph.add_run(span.text)
    _format(run, span)
    run.font.color.rgb = RGBColor(0x1A, 0x56, 0xB0)
    run.font.underline = True
    link.append(run._r)
    paragraph._p.append(link)


def _table(document, block: Table) -> None:
    rows = ([block.header] if block.header else []) + block.rows
    columns = max((len(r) for r in rows), default=1)
    table = document.add_table(rows=len(rows), cols=columns)
    table.style = "Table Grid"
    for r, row in enumerate(rows):
        for c, cell in enumerate(row):
            paragraph = table.cell(r, c).paragraphs[0]
            _runs(paragraph, [Span(s.text, s.bold or (r == 0 and bool(block.header)), s.italic, s.code, s.strike, s.link)
                              for s in cell])


def _rule(paragraph) -> None:
    borders = OxmlElement("w:pBdr")
    bottom = OxmlElement("w:bottom")
    for key, value in (("w:val", "single"), ("w:sz", "6"), ("w:space", "1"), ("w:color", "BBBBBB")):
        bottom.set(qn(key), value)
    borders.append(bottom)
    paragraph._p.get_or_add_pPr().append(borders)


def _decorate(section, layout: Layout) -> None:
    header = section.header
    header.is_linked_to_previous = False
    first = header.paragraphs[0]
    if layout.header:
        first.add_run(layout.header)
    if layout.watermark:
        _watermark(header.add_paragraph(), layout.watermark)
    footer = section.footer
    footer.is_linked_to_previous = False
    paragraph = footer.paragraphs[0]
    if not (layout.footer or layout.timestamp or layout.page_numbers):
        return
    width = section.page_width - section.left_margin - section.right_margin
    paragraph.paragraph_format.tab_stops.add_tab_stop(int(width // 2), WD_TAB_ALIGNMENT.CENTER)
    paragraph.paragraph_format.tab_stops.add_tab_stop(int(width), WD_TAB_ALIGNMENT.RIGHT)
    if layout.footer:
        paragraph.add_run(layout.footer)
    paragraph.add_run("\t")
    if layout.timestamp:
        paragraph.add_run(layout.timestamp)
    if layout.page_numbers:
        paragraph.add_run("\tPage ")
        _page_field(paragraph.add_run())


def _page_field(run) -> None:
    """A PAGE field (Word fills in the page number), with "1" as the value shown before it updates."""
    for kind, text in (("begin", None), ("instr", " PAGE "), ("separate", None), ("text", "1"), ("end", None)):
        if kind == "instr":
            element = OxmlElement("w:instrText")
            element.set(qn("xml:space"), "preserve")
            element.text = text
        elif kind == "text":
            element = OxmlElement("w:t")
            element.text = text
        else:
            element = OxmlElement("w:fldChar")
            element.set(qn("w:fldCharType"), kind)
        run._r.append(element)


def _watermark(paragraph, text: str) -> None:
    paragraph.alignment = WD_ALIGN_PARAGRAPH.CENTER
    shape = parse_xml(
        '<w:pict xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
        'xmlns:v="urn:schemas-microsoft-com:vml" xmlns:o="urn:schemas-microsoft-com:office:office">'
        '<v:shape id="C2GWatermark" o:spid="_x0000_s2049" type="#_x0000_t136" fillcolor="#d9d9d9" stroked="f" '
        'style="position:absolute;margin-left:0;margin-top:0;width:468pt;height:117pt;rotation:315;'
        'z-index:-251654144;mso-position-horizontal:center;mso-position-horizontal-relative:margin;'
        'mso-position-vertical:center;mso-position-vertical-relative:margin">'
        '<v:fill opacity="0.18"/>'
        f'<v:textpath on="t" style="font-family:&quot;Calibri&quot;;font-size:1pt" string="{escape(text, {chr(34): "&quot;"})}"/>'
        '</v:shape></w:pict>')
    paragraph.add_run()._r.append(shape)
