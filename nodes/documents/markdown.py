"""Markdown parsed once (markdown-it, CommonMark plus tables and strikethrough) into a small block model
that every document writer (PDF, DOCX, text) walks the same way.

Raw HTML in the content is kept as text, never passed through: a generated document must not carry
markup (or scripts) that the content smuggled in.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from typing import TYPE_CHECKING

if TYPE_CHECKING:   # imported in parser(): `canvas2graph compile` loads DocGenerator without rendering
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

_THINKING = re.compile(r"<think>.*?</think>", re.S)
_DANGLING_THINKING = re.compile(r"<think>.*\Z", re.S)


def parser() -> MarkdownIt:
    from markdown_it import MarkdownIt
    return MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(["table", "strikethrough"])


def strip_thinking(text: str) -> str:
    """Drop a reasoning model's <think> blocks: they do not belong in an exported document."""
    return _DANGLING_THINKING.sub("", _THINKING.sub("", text))


@dataclass
class Span:
    text: str
    bold: bool = False
    italic: bool = False
    code: bool = False
    strike: bool = False
    link: str | None = None


@dataclass
class Heading:
    level: int
    spans: list[Span]


@dataclass
class Paragraph:
    spans: list[Span]


@dataclass
class ListBlock:
    ordered: bool
    start: int
    items: list[list["Block"]]


@dataclass
class Code:
    text: str


@dataclass
class Quote:
    blocks: list["Block"]


@dataclass
class Table:
    header: list[list[Span]]
    rows: list[list[list[Span]]] = field(default_factory=list)


@dataclass
class Rule:
    pass


Block = Heading | Paragraph | ListBlock | Code | Quote | Table | Rule


def parse(text: str) -> list[Block]:
    tokens = parser().parse(text)
    blocks, _ = _blocks(tokens, 0, None)
    return blocks


def plain(spans: list[Span]) -> str:
    return "".join(s.text for s in spans)


def _blocks(tokens: list[Token], i: int, closing: str | None) -> tuple[list[Block], int]:
    """Blocks from tokens[i:] up to the token of type `closing`; returns them and the index after it."""
    out: list[Block] = []
    while i < len(tokens):
        t = tokens[i]
        if closing is not None and t.type == closing:
            return out, i + 1
        if t.type == "heading_open":
            out.append(Heading(int(t.tag[1]), _spans(tokens[i + 1])))
            i += 3
        elif t.type == "paragraph_open":
            out.append(Paragraph(_spans(tokens[i + 1])))
            i += 3
        elif t.type in ("bullet_list_open", "ordered_list_open"):
            ordered = t.type == "ordered_list_open"
            start = int(t.attrGet("start") or 1) if ordered else 1
            items, i = _items(tokens, i + 1, t.type.replace("_open", "_close"))
            out.append(ListBlock(ordered, start, items))
        elif t.type in ("fence", "code_block"):
            out.append(Code(t.content.rstrip("\n")))
            i += 1
        elif t.type == "blockquote_open":
            inner, i = _blocks(tokens, i + 1, "blockquote_close")
            out.append(Quote(inner))
        elif t.type == "table_open":
            table, i = _table(tokens, i + 1)
            out.append(table)
        elif t.type == "hr":
            out.append(Rule())
            i += 1
        elif t.type == "html_block":
            out.append(Paragraph([Span(t.content.rstrip("\n"))]))
            i += 1
        else:
            i += 1
    return out, i


def _items(tokens: list[Token], i: int, closing: str) -> tuple[list[list[Block]], int]:
    items: list[list[Block]] = []
    while i < len(tokens) and tokens[i].type != closing:
        if tokens[i].type == "list_item_open":
            item, i = _blocks(tokens, i + 1, "list_item_close")
            items.append(item)
        else:
            i += 1
    return items, i + 1


def _table(tokens: list[Token], i: int) -> tuple[Table, int]:
    rows: list[list[list[Span]]] = []
    header_rows = 0
    in_head = False
    row: list[list[Span]] = []
    while tokens[i].type != "table_close":
        t = tokens[i]
        if t.type == "thead_open":
            in_head = True
        elif t.type == "thead_close":
            in_head = False
        elif t.type == "tr_open":
            row = []
        elif t.type == "tr_close":
            rows.append(row)
            header_rows += in_head
        elif t.type == "inline":
            row.append(_spans(t))
        i += 1
    return Table(header=rows[0] if header_rows else [], rows=rows[header_rows:]), i + 1


def _spans(inline: Token) -> list[Span]:
    spans: list[Span] = []
    bold = italic = strike = 0
    link: str | None = None
    for t in inline.children or []:
        kind = t.type
        if kind == "strong_open":
            bold += 1
        elif kind == "strong_close":
            bold -= 1
        elif kind == "em_open":
            italic += 1
        elif kind == "em_close":
            italic -= 1
        elif kind == "s_open":
            strike += 1
        elif kind == "s_close":
            strike -= 1
        elif kind == "link_open":
            link = str(t.attrGet("href") or "")
        elif kind == "link_close":
            link = None
        elif kind in ("softbreak", "hardbreak"):
            spans.append(Span("\n" if kind == "hardbreak" else " "))
        elif kind == "code_inline":
            spans.append(Span(t.content, bool(bold), bool(italic), True, bool(strike), link))
        elif kind == "image":
            alt = "".join(c.content for c in t.children or []) or t.attrGet("src") or ""
            spans.append(Span(f"[{alt}]", bool(bold), bool(italic), False, bool(strike), None))
        elif kind in ("text", "html_inline"):
            spans.append(Span(t.content, bool(bold), bool(italic), False, bool(strike), link))
    return spans
