"""A parsed HTML page as lines of text, broken where a browser breaks lines.

The HTTP node's `clean_html` (`nodes/invoke.py`) and the Crawler tool's text mode (`nodes/tools/crawler.py`)
both read a page this way; each decides which tags to drop first and which tags are blocks.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from bs4 import Tag


def block_lines(root: Tag, blocks: Iterable[str]) -> list[str]:
    """The text of `root` (a BeautifulSoup document or element), one line per block: `<br>` ends a line,
    each tag named in `blocks` starts and ends one, and inline markup (<b>, <a>) stays in its line.
    Whitespace inside a line collapses to single spaces; lines left empty stay, for the caller to drop
    or keep. `root` is changed in place."""
    for br in root.find_all("br"):
        br.replace_with("\n")
    for tag in root.find_all(tuple(blocks)):
        tag.insert_before("\n")
        tag.insert_after("\n")
    return [" ".join(line.split()) for line in root.get_text().splitlines()]
