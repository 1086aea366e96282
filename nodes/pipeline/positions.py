"""PDF coordinates on items and chunks, in RAGFlow's shapes (rag/flow/parser/pdf_chunk_metadata.py).

A parser item carries `positions`: `[[page, left, right, top, bottom], ...]` (pages from 1). The
chunkers carry them along as `_pdf_positions` while they merge and split, and a finished chunk gets
the indexed fields `position_int`, `page_num_int` and `top_int` instead.
"""
from __future__ import annotations

import re
from copy import deepcopy
from typing import Any

PDF_POSITIONS_KEY = "_pdf_positions"
POSITION_TAG = re.compile(r"@@[\t0-9.-]+?##")


def remove_tag(text: str | None) -> str:
    """Text without `@@page\\tleft\\tright\\ttop\\tbottom##` coordinate tags."""
    return POSITION_TAG.sub("", text or "")


def _raw(item: dict[str, Any]) -> list:
    for key in (PDF_POSITIONS_KEY, "positions"):
        if isinstance(item.get(key), list):
            return deepcopy(item[key])
    if isinstance(item.get("position_int"), list):
        return [list(p) for p in item["position_int"] if isinstance(p, (list, tuple)) and len(p) >= 5]
    if item.get("page_number") is not None and all(item.get(k) is not None for k in ("x0", "x1", "top", "bottom")):
        return [[item["page_number"], item["x0"], item["x1"], item["top"], item["bottom"]]]
    return []


def extract_positions(item: Any) -> list[list[float]]:
    """An item's coordinates as `[[page, left, right, top, bottom], ...]`, pages counted from 1."""
    if not isinstance(item, dict):
        return []
    out = []
    for pos in _raw(item):
        if not isinstance(pos, (list, tuple)) or len(pos) < 5:
            continue
        page = pos[0][-1] if isinstance(pos[0], list) else pos[0]
        try:
            page = int(page)
            out.append([page + 1 if page <= 0 else page, float(pos[1]), float(pos[2]), float(pos[3]), float(pos[4])])
        except (TypeError, ValueError):
            continue
    return out


def finalize_chunk(chunk: Any) -> Any:
    """Coordinates into the indexed fields, the working key dropped."""
    if not isinstance(chunk, dict):
        return chunk
    positions = extract_positions(chunk)
    if positions:
        fields: dict[str, list] = {"position_int": [], "page_num_int": [], "top_int": []}
        for pos in positions:
            page, left, right, top, bottom = (int(v) for v in pos[:5])
            fields["position_int"].append([page, left, right, top, bottom])
            fields["page_num_int"].append(page)
            fields["top_int"].append(top)
        chunk.update(fields)
    chunk.pop(PDF_POSITIONS_KEY, None)
    return chunk
