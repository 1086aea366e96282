"""Markdown blocks as plain text (DocGenerator's `txt`): the words and the structure, none of the markup.

Headings are lines of their own, lists keep their bullets and numbers, code blocks are indented by
four spaces, quotes prefixed with "> " and tables laid out as aligned columns (tabulate's `simple`).
"""
from __future__ import annotations

from tabulate import tabulate

from canvas2graph.nodes.documents.markdown import Block, Code, Heading, ListBlock, Paragraph, Quote, Rule, Table, plain


def write_text(blocks: list[Block]) -> str:
    return "\n\n".join(_block(b) for b in blocks).strip() + "\n"


def _block(block: Block) -> str:
    if isinstance(block, (Heading, Paragraph)):
        return plain(block.spans)
    if isinstance(block, Code):
        return "\n".join("    " + line for line in block.text.splitlines())
    if isinstance(block, ListBlock):
        lines = []
        for n, item in enumerate(block.items, start=block.start):
            marker = f"{n}. " if block.ordered else "- "
            body = "\n".join(_block(b) for b in item).splitlines() or [""]
            lines.append(marker + body[0])
            lines += [" " * len(marker) + line for line in body[1:]]
        return "\n".join(lines)
    if isinstance(block, Quote):
        return "\n".join("> " + line for line in "\n\n".join(_block(b) for b in block.blocks).splitlines())
    if isinstance(block, Table):
        rows = [[plain(c) for c in row] for row in block.rows]
        return tabulate(rows, headers=[plain(c) for c in block.header] if block.header else (), tablefmt="simple")
    if isinstance(block, Rule):
        return "-" * 40
    return ""
