"""Markdown blocks to PDF with reportlab's page layout engine (platypus).

Every page carries the decorations RAGFlow draws over its PDFs, at the same places: the header at
the top left, the footer at the bottom left, the timestamp centred at the bottom, "Page N" at the
bottom right, and the watermark across the middle at 45 degrees, light grey and mostly transparent,
under the text. CJK runs are set in the CJK font (`fonts.py`), the rest in the Latin family.
"""
from __future__ import annotations

import io
import re
from xml.sax.saxutils import escape

from reportlab.lib import colors
from reportlab.lib.enums import TA_LEFT
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle
from reportlab.platypus import (HRFlowable, ListFlowable, ListItem, Paragraph, SimpleDocTemplate, Spacer, Table,
                                TableStyle)

from canvas2graph.nodes.documents.fonts import PdfFonts, pdf_fonts
from canvas2graph.nodes.documents.layout import Layout, heading_size
from canvas2graph.nodes.documents.markdown import Block, Code, Heading, ListBlock, Paragraph as Para, Quote, Rule, Span, Table as Tbl

MARGIN = 54                # the text block's side margins (0.75 in)
DECORATION_MARGIN = 36     # where RAGFlow draws header and footer lines (0.5 in from the edge)
DECORATION_SIZE = 9
WATERMARK_SIZE = 48
CJK = re.compile(r"([\u2e80-\u2fff\u3000-\u303f\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
                 r"\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef]+)")


def has_cjk(text: str) -> bool:
    return bool(CJK.search(text or ""))


def write_pdf(blocks: list[Block], layout: Layout) -> bytes:
    fonts = pdf_fonts()
    writer = _Writer(fonts, layout)
    buffer = io.BytesIO()
    doc = SimpleDocTemplate(buffer, pagesize=A4, leftMargin=MARGIN, rightMargin=MARGIN, topMargin=MARGIN + 18,
                            bottomMargin=MARGIN + 18, title=layout.title, author="canvas2graph",
                            creator="canvas2graph DocGenerator")
    story = writer.flowables(blocks, doc.width) or [Spacer(1, 1)]
    doc.build(story, onFirstPage=writer.decorate, onLaterPages=writer.decorate)
    return buffer.getvalue()


class _Writer:
    def __init__(self, fonts: PdfFonts, layout: Layout):
        self.fonts, self.layout = fonts, layout
        size = layout.font_size
        self.body = ParagraphStyle("body", fontName=fonts.regular, fontSize=size, leading=round(size * 1.35, 1),
                                   spaceAfter=size * 0.6, alignment=TA_LEFT)
        self.code = ParagraphStyle("code", parent=self.body, fontName=fonts.mono, fontSize=size - 1,
                                   leading=round((size - 1) * 1.3, 1), backColor=colors.HexColor("#f4f4f4"),
                                   borderPadding=4, spaceBefore=2, spaceAfter=size * 0.8)
        self.cell = ParagraphStyle("cell", parent=self.body, spaceAfter=0)
        self.headings = {level: ParagraphStyle(f"h{level}", parent=self.body, fontName=fonts.bold,
                                               fontSize=heading_size(size, level),
                                               leading=round(heading_size(size, level) * 1.25, 1),
                                               spaceBefore=size * 0.8, spaceAfter=size * 0.5, keepWithNext=True)
                         for level in range(1, 7)}

    # --- text -----------------------------------------------------------------------------
    def markup(self, spans: list[Span], *, code_font: bool = False) -> str:
        parts = []
        for s in spans:
            text = escape(s.text)
            if s.code or code_font:
                text = text.replace(" ", "&nbsp;")
            text = CJK.sub(lambda m: f'<font face="{self.fonts.cjk}">{m.group(1)}</font>', text).replace("\n", "<br/>")
            if s.code:
                text = f'<font face="{self.fonts.mono}" backColor="#f0f0f0">{text}</font>'
            if s.bold:
                text = f"<b>{text}</b>"
            if s.italic:
                text = f"<i>{text}</i>"
            if s.strike:
                text = f"<strike>{text}</strike>"
            if s.link:
                text = f'<a href="{escape(s.link, {chr(34): "&quot;"})}" color="#1a56b0"><u>{text}</u></a>'
            parts.append(text)
        return "".join(parts)

    # --- blocks ---------------------------------------------------------------------------
    def flowables(self, blocks: list[Block], width: float) -> list:
        out: list = []
        for block in blocks:
            if isinstance(block, Heading):
                out.append(Paragraph(self.markup(block.spans), self.headings[min(block.level, 6)]))
            elif isinstance(block, Para):
                out.append(Paragraph(self.markup(block.spans), self.body))
            elif isinstance(block, Code):
                out.append(Paragraph(self.markup([Span(block.text)], code_font=True), self.code))
            elif isinstance(block, ListBlock):
                out.append(self._list(block, width))
            elif isinstance(block, Quote):
                out += [self._quote(block, width), Spacer(1, self.layout.font_size * 0.6)]
            elif isinstance(block, Tbl):
                out += [self._table(block, width), Spacer(1, self.layout.font_size * 0.6)]
            elif isinstance(block, Rule):
                out.append(HRFlowable(width="100%", color=colors.HexColor("#bbbbbb"), spaceBefore=4, spaceAfter=8))
        return out

    def _list(self, block: ListBlock, width: float) -> ListFlowable:
        items = [ListItem(self.flowables(item, width - 18) or [Paragraph("", self.body)]) for item in block.items]
        kind = {"bulletType": "1", "start": block.start, "bulletFormat": "%s."} if block.ordered else {"bulletType": "bullet", "start": "•"}
        return ListFlowable(items, leftIndent=18, bulletFontName=self.fonts.regular,
                            bulletFontSize=self.layout.font_size, **kind)

    def _quote(self, block: Quote, width: float) -> Table:
        inner = self.flowables(block.blocks, width - 16) or [Paragraph("", self.body)]
        table = Table([[inner]], colWidths=[width - 4])
        table.setStyle(TableStyle([("LINEBEFORE", (0, 0), (0, 0), 2, colors.HexColor("#bbbbbb")),
                                   ("LEFTPADDING", (0, 0), (0, 0), 10), ("TEXTCOLOR", (0, 0), (0, 0), colors.grey)]))
        return table

    def _table(self, block: Tbl, width: float) -> Table:
        rows = ([block.header] if block.header else []) + block.rows
        columns = max((len(r) for r in rows), default=1)
        data = [[Paragraph(self.markup(cell), self.cell) for cell in row] + [""] * (columns - len(row)) for row in rows]
        table = Table(data, colWidths=[width / columns] * columns, repeatRows=1 if block.header else 0)
        style = [("GRID", (0, 0), (-1, -1), 0.5, colors.HexColor("#999999")), ("VALIGN", (0, 0), (-1, -1), "TOP")]
        if block.header:
            style.append(("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#eeeeee")))
        table.setStyle(TableStyle(style))
        return table

    # --- every page ---------------------------------------------------------------------------
    def _font_for(self, text: str) -> str:
        return self.fonts.cjk if has_cjk(text) else self.fonts.regular

    def decorate(self, canvas, doc) -> None:
        layout = self.layout
        width, height = doc.pagesize
        canvas.saveState()
        if layout.watermark:
            canvas.saveState()
            canvas.setFillColor(colors.Color(0.6, 0.6, 0.6, alpha=0.15))
            canvas.setFont(self._font_for(layout.watermark), WATERMARK_SIZE)
            canvas.translate(width / 2, height / 2)
            canvas.rotate(45)
            canvas.drawCentredString(0, 0, layout.watermark)
            canvas.restoreState()
        canvas.setFillColor(colors.Color(0.35, 0.35, 0.35))
        low = DECORATION_MARGIN - 8
        if layout.header:
            canvas.setFont(self._font_for(layout.header), DECORATION_SIZE)
            canvas.drawString(DECORATION_MARGIN, height - DECORATION_MARGIN + 8, layout.header)
        if layout.footer:
            canvas.setFont(self._font_for(layout.footer), DECORATION_SIZE)
            canvas.drawString(DECORATION_MARGIN, low, layout.footer)
        if layout.timestamp:
            canvas.setFont(self.fonts.regular, DECORATION_SIZE)
            canvas.drawCentredString(width / 2, low, layout.timestamp)
        if layout.page_numbers:
            canvas.setFont(self.fonts.regular, DECORATION_SIZE)
            canvas.drawRightString(width - DECORATION_MARGIN, low, f"Page {doc.page}")
        canvas.restoreState()
