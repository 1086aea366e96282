"""What a generated document looks like besides its content: DocGenerator's layout params."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    title: str = ""
    header: str = ""
    footer: str = ""
    watermark: str = ""
    page_numbers: bool = True
    timestamp: str = ""          # "Generated: <time>", or "" when the document carries none
    font_size: int = 12


def heading_size(base: int, level: int) -> int:
    """RAGFlow's heading sizes: levels 1-3 are 6, 4 and 2 points above the body text, deeper ones body size."""
    return base + {1: 6, 2: 4, 3: 2}.get(level, 0)
