"""Fonts for generated PDFs: a Latin family and a CJK font, found on this machine and embedded.

Latin text uses DejaVu Sans (Debian's fonts-dejavu-core, on nearly every Linux), else reportlab's
built-in Helvetica. Chinese, Japanese and Korean text uses the first CJK TrueType font found:
`CANVAS2GRAPH_CJK_FONT` (a .ttf or .ttc path), then WenQuanYi Micro Hei (Debian's fonts-wqy-microhei,
which `.ci/run` installs), WenQuanYi Zen Hei, AR PL UMing, Droid Sans Fallback, and the usual macOS and
Windows fonts. Fonts with PostScript (CFF) outlines, such as Noto Sans CJK, cannot be embedded by
reportlab and are skipped. Without any, CJK text falls back to reportlab's `STSong-Light`, an Adobe
Asian font that is named, not embedded: readers show it with a font of their own. See docs/documents.md.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

CJK_FONT_ENV = "CANVAS2GRAPH_CJK_FONT"
CJK_CANDIDATES = (
    "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
    "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",
    "/usr/share/fonts/truetype/arphic/uming.ttc",
    "/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf",
    "/System/Library/Fonts/STHeiti Medium.ttc",
    "/Library/Fonts/Arial Unicode.ttf",
    "C:/Windows/Fonts/msyh.ttc",
    "C:/Windows/Fonts/simsun.ttc",
)
DEJAVU_DIRS = ("/usr/share/fonts/truetype/dejavu", "/usr/share/fonts/dejavu", "/usr/local/share/fonts")
CID_FALLBACK = "STSong-Light"


@dataclass(frozen=True)
class PdfFonts:
    regular: str
    bold: str
    italic: str
    bold_italic: str
    mono: str
    cjk: str                      # the reportlab name CJK runs are set in
    cjk_family: str               # the font's family name, for DOCX and HTML
    cjk_embedded: bool


@lru_cache(maxsize=1)
def pdf_fonts() -> PdfFonts:
    from reportlab.lib.fonts import addMapping
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont

    latin = _dejavu()
    if latin:
        for name, path in latin.items():
            pdfmetrics.registerFont(TTFont(name, str(path)))
        regular, bold, italic, bold_italic, mono = ("C2G-Sans", "C2G-Sans-Bold", "C2G-Sans-Oblique",
                                                    "C2G-Sans-BoldOblique", "C2G-Mono")
        for b, i, face in ((0, 0, regular), (1, 0, bold), (0, 1, italic), (1, 1, bold_italic)):
            addMapping(regular, b, i, face)
    else:
        regular, bold, italic, bold_italic, mono = ("Helvetica", "Helvetica-Bold", "Helvetica-Oblique",
                                                    "Helvetica-BoldOblique", "Courier")
    for path in _cjk_candidates():
        try:
            pdfmetrics.registerFont(TTFont("C2G-CJK", str(path), subfontIndex=0))
        except Exception:        # not a TrueType font reportlab can embed (CFF outlines, damaged): next one
            continue
        for b in (0, 1):
            for i in (0, 1):
                addMapping("C2G-CJK", b, i, "C2G-CJK")
        return PdfFonts(regular, bold, italic, bold_italic, mono, "C2G-CJK", _family(path), True)
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont
    pdfmetrics.registerFont(UnicodeCIDFont(CID_FALLBACK))
    for b in (0, 1):
        for i in (0, 1):
            addMapping(CID_FALLBACK, b, i, CID_FALLBACK)
    return PdfFonts(regular, bold, italic, bold_italic, mono, CID_FALLBACK, "SimSun", False)


def cjk_family() -> str:
    """The CJK font family documents name (DOCX East Asian font, HTML font stack)."""
    for path in _cjk_candidates():
        return _family(path)
    return "SimSun"


def _cjk_candidates() -> list[Path]:
    chosen = os.environ.get(CJK_FONT_ENV, "").strip()
    paths = ([Path(chosen).expanduser()] if chosen else []) + [Path(p) for p in CJK_CANDIDATES]
    return [p for p in paths if p.is_file()]


def _dejavu() -> dict[str, Path] | None:
    files = {"C2G-Sans": "DejaVuSans.ttf", "C2G-Sans-Bold": "DejaVuSans-Bold.ttf",
             "C2G-Sans-Oblique": "DejaVuSans-Oblique.ttf", "C2G-Sans-BoldOblique": "DejaVuSans-BoldOblique.ttf",
             "C2G-Mono": "DejaVuSansMono.ttf"}
    for folder in DEJAVU_DIRS:
        found = {name: Path(folder) / file for name, file in files.items()}
        if all(p.is_file() for p in found.values()):
            return found
    return None


def _family(path: Path) -> str:
    known = {"wqy-microhei": "WenQuanYi Micro Hei", "wqy-zenhei": "WenQuanYi Zen Hei", "uming": "AR PL UMing CN",
             "DroidSansFallbackFull": "Droid Sans Fallback", "msyh": "Microsoft YaHei", "simsun": "SimSun",
             "STHeiti Medium": "Heiti SC", "Arial Unicode": "Arial Unicode MS"}
    return known.get(path.stem, path.stem)
