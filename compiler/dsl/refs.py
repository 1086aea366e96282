"""Variable references, parsed once at compile time.

RAGFlow writes references as `{sys.query}`, `{env.name}` and `{Component:Id@key.sub.0}` inside
text, and as bare `sys.query` / `Component:Id@key` in some params. RAGFlow re-scans text with a
regex every time a node runs; here a text is parsed once into a `Template` of literal parts and
`Ref`s, and nodes render it from state.

Two substitution styles exist in RAGFlow and both are kept (SPEC 4.1):
- *spliced* (streaming Message, get_value_with_variable): the whole regex match, including extra
  braces and the spaces next to the reference, is replaced, so `"x {sys.query} y"` gives `"xQy"`;
- *exact* (string_format: prompts, non-streaming Message, StringTransform merge): only `{expr}`
  is replaced, spaces are kept and `{{expr}}` becomes `{value}`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

# SPEC 4.1: the canonical pattern, `\{* *\{(expr)\} *\}*`. Group 1 is the expression. It is kept for
# reference and for single matches; scanning a text uses `_find_refs`, which gives the same matches in
# linear time (the pattern's leading `\{* *` makes a regex scan quadratic on text full of `{` or spaces).
_EXPR = r"[a-zA-Z0-9_:]+@[A-Za-z0-9_.-]+|sys\.[A-Za-z0-9_.]+|env\.[A-Za-z0-9_.]+"
REF_PATTERN = re.compile(r"\{* *\{(" + _EXPR + r")\} *\}*", re.IGNORECASE | re.DOTALL)
# Inside an Iteration, {item}, {index} and {result} alias the IterationItem's outputs.
ITERATION_ALIAS_PATTERN = re.compile(r"\{* *\{(item|index|result)\} *\}*")
BARE_REF = re.compile(r"^(?:" + _EXPR + r")$")
# the core of each pattern: a regex finds these in linear time (they start with a literal brace and
# their expression cannot contain one), and `_find` widens each to the full match
_REF_CORE = re.compile(r"\{(" + _EXPR + r")\}", re.IGNORECASE)
_ALIAS_CORE = re.compile(r"\{(item|index|result)\}")
_RIGHT = re.compile(r" *\}*")


@dataclass(frozen=True)
class _Match:
    """One reference in a text: the whole spliced match [start, end) and the inner `{expr}` [inner, inner_end)."""

    start: int
    end: int
    inner: int
    inner_end: int
    expr: str


def _find(core: re.Pattern, text: str) -> list[_Match]:
    r"""The matches `\{* *<core> *\}*` would give with `finditer`, found in linear time.

    Each core `{expr}` is widened leftwards over spaces, then braces (never past the previous match),
    and rightwards over spaces, then braces: what the regex's greedy prefix and suffix take.
    """
    found: list[_Match] = []
    floor = 0
    for m in core.finditer(text):
        left = text[floor:m.start()]
        without_spaces = left.rstrip(" ")
        start = floor + len(without_spaces.rstrip("{"))
        end = _RIGHT.match(text, m.end()).end()
        found.append(_Match(start, end, m.start(), m.end(), m.group(1)))
        floor = end
    return found


def has_jinja(text: str) -> bool:
    """Whether `text` looks like a Jinja template (`{{`, `}}` or `{% ... %}`), in linear time."""
    if "{{" in text or "}}" in text:
        return True
    opening = text.find("{%")
    return opening >= 0 and text.find("%}", opening + 2) >= 0


RefKind = Literal["global", "component"]


@dataclass(frozen=True)
class Ref:
    """One reference: a global (`sys.x`, `env.x`) or a component output with an optional path."""

    expr: str                        # as written, without braces, e.g. "LLM:A@content.items.0"
    kind: RefKind
    name: str                        # global name ("sys.query") or component id
    key: str = ""                    # component output key ("content")
    path: tuple[str, ...] = ()       # nested path segments after the key

    @property
    def component_id(self) -> str | None:
        return self.name if self.kind == "component" else None


def parse_ref(expr: str) -> Ref:
    """Parse a reference expression (braces and spaces around it are ignored, as RAGFlow does)."""
    expr = expr.strip("{").strip("}").strip(" ").strip("{").strip("}")
    if "@" not in expr:
        return Ref(expr=expr, kind="global", name=expr)
    cpn, rest = expr.split("@", 1)
    key, *path = rest.split(".")
    return Ref(expr=expr, kind="component", name=cpn, key=key, path=tuple(path))


def looks_like_ref(text: str) -> bool:
    """True if `text` is a single bare or braced reference such as `sys.query` or `{A@b}`."""
    stripped = text.strip().strip("{").strip("}").strip(" ").strip("{").strip("}")
    return bool(BARE_REF.match(stripped))


@dataclass(frozen=True)
class Template:
    """A text with references, pre-split for both substitution styles.

    `spliced` and `exact` are tuples alternating literal text and `Ref`: strings are literals.
    """

    text: str
    refs: tuple[Ref, ...]
    spliced: tuple[str | Ref, ...]
    exact: tuple[str | Ref, ...]
    has_jinja: bool = False
    aliases: tuple[str, ...] = field(default=())   # iteration aliases used (item/index/result)

    @property
    def is_literal(self) -> bool:
        return not self.refs and not self.aliases


_EMPTY_CACHE: dict[str, Template] = {}


def parse_template(text: str, *, iteration_aliases: bool = False) -> Template:
    """Split `text` into literals and references (SPEC 4.1)."""
    if not isinstance(text, str):
        text = str(text)
    spliced: list[str | Ref] = []
    exact: list[str | Ref] = []
    refs: list[Ref] = []
    aliases: list[str] = []
    matches = [(m, parse_ref(m.expr)) for m in _find(_REF_CORE, text)]
    if iteration_aliases:
        # an alias's surrounding spaces may overlap a neighbouring reference's ("{sys.query} {item}"):
        # both count (a reference's expression holds no brace, so no alias lies inside one)
        for m in _find(_ALIAS_CORE, text):
            aliases.append(m.expr)
            matches.append((m, Ref(expr=m.expr, kind="component", name="", key=m.expr)))
        matches.sort(key=lambda pair: pair[0].start)
    pos_s = 0
    pos_e = 0
    for m, ref in matches:
        refs.append(ref)
        # spliced: the whole match goes, spaces and extra braces included
        spliced.append(text[pos_s:m.start])
        spliced.append(ref)
        pos_s = max(pos_s, m.end)
        # exact: only the innermost "{expr}" goes
        exact.append(text[pos_e:m.inner])
        exact.append(ref)
        pos_e = m.inner_end
    spliced.append(text[pos_s:])
    exact.append(text[pos_e:])
    return Template(
        text=text,
        refs=tuple(refs),
        spliced=tuple(p for p in spliced if p != ""),
        exact=tuple(p for p in exact if p != ""),
        has_jinja=has_jinja(text),
        aliases=tuple(aliases),
    )


def bind_aliases(template: Template, component_id: str) -> Template:
    """Point `{item}`, `{index}`, `{result}` at the IterationItem that defines them."""
    if not template.aliases:
        return template

    def bind(part):
        if isinstance(part, Ref) and not part.name:
            return Ref(expr=part.expr, kind="component", name=component_id, key=part.key)
        return part
    return Template(text=template.text, refs=tuple(bind(r) for r in template.refs),
                    spliced=tuple(bind(p) for p in template.spliced), exact=tuple(bind(p) for p in template.exact),
                    has_jinja=template.has_jinja, aliases=template.aliases)
