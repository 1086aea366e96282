"""Links between the README and docs/ lead somewhere: every relative link names a file that exists, and every
`#anchor` one of its headings (as GitHub makes anchors from headings)."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")         # inline code: `![name](url)` is an example, not a link


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, spaces as `-`."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return {anchor(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def test_every_relative_link_and_anchor_in_the_docs_resolves():
    broken = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for target in LINK.findall(CODE.sub("", FENCE.sub("", page.read_text(encoding="utf-8")))):
            if re.match(r"^[a-z]+:", target):
                continue                    # http:, https:, mailto:
            file, _, fragment = target.partition("#")
            resolved = (page.parent / file).resolve() if file else page
            if not resolved.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert broken == []
