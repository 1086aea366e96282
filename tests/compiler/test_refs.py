"""Variable references (SPEC 4.1): the pattern, both substitution styles and iteration aliases."""
from __future__ import annotations

import pytest

from canvas2graph.compiler.canvas import diagnose
from canvas2graph.compiler.dsl.refs import Ref, looks_like_ref, parse_ref, parse_template
from tests.conftest import cpn, dsl

VALUES = {"sys.query": "Q", "A@content": "a", "B@content": "b", "Cpn:X@result": "r", "env.city": "Paris",
          "item": "I", "index": "0"}


def fill(parts, values=VALUES) -> str:
    """Join a template's parts, each Ref replaced by its value (what the runtime renderers do)."""
    return "".join(p if isinstance(p, str) else values[p.expr] for p in parts)


def spliced(text: str, **kw) -> str:
    return fill(parse_template(text, **kw).spliced)


def exact(text: str, **kw) -> str:
    return fill(parse_template(text, **kw).exact)


def exprs(text: str, **kw) -> list[str]:
    return [r.expr for r in parse_template(text, **kw).refs]


# --- what is a reference -----------------------------------------------------------------------

def test_system_conversation_and_component_references_are_found():
    assert exprs("{sys.query} {env.city} {Agent:Brave@content}") == ["sys.query", "env.city", "Agent:Brave@content"]


def test_a_component_reference_splits_into_id_key_and_path():
    ref = parse_ref("{Agent:X@structured.items.0}")
    assert ref == Ref(expr="Agent:X@structured.items.0", kind="component", name="Agent:X", key="structured",
                      path=("items", "0"))
    assert ref.component_id == "Agent:X"


def test_a_global_reference_has_no_component():
    ref = parse_ref("sys.query")
    assert (ref.kind, ref.name, ref.component_id) == ("global", "sys.query", None)


def test_only_the_first_at_sign_splits_id_from_key():
    assert parse_ref("A@b@c").key == "b@c"


def test_spaces_inside_the_braces_make_it_plain_text():
    assert exprs("{ sys.query }") == []
    assert exprs("{sys.query }") == []


def test_ids_with_a_dash_cannot_be_referenced():
    assert exprs("{Agent-1@content}") == []


def test_a_dash_is_allowed_in_the_output_path():
    assert exprs("{Agent:X@my-key}") == ["Agent:X@my-key"]


def test_non_ascii_output_keys_cannot_be_referenced():
    assert exprs("{begin@用户输入}") == []


def test_an_email_address_is_not_a_reference():
    assert exprs("write to me@example.com") == []


def test_text_without_references_is_literal():
    t = parse_template("just text")
    assert t.is_literal and t.spliced == t.exact == ("just text",)


def test_non_string_text_is_stringified():
    assert parse_template(12).text == "12"


# --- spliced style (streaming Message, get_value_with_variable) ---------------------------------

def test_spliced_style_removes_the_spaces_next_to_a_reference():
    assert spliced("x {sys.query} y") == "xQy"


def test_spliced_style_joins_neighbouring_references_without_their_spaces():
    assert spliced("Answer: {A@content} / {B@content}") == "Answer:a/b"


def test_spliced_style_removes_extra_braces():
    assert spliced("<{{sys.query}}>") == "<Q>"
    assert spliced("<{{ {sys.query} }}>") == "<Q>"


def test_spliced_style_keeps_spaces_that_do_not_touch_a_reference():
    assert spliced("a b.{sys.query}.c d") == "a b.Q.c d"


# --- exact style (string_format: prompts, non-stream Message, StringTransform) -------------------

def test_exact_style_keeps_the_spaces_next_to_a_reference():
    assert exact("x {sys.query} y") == "x Q y"


def test_exact_style_turns_double_braces_into_single_braces_around_the_value():
    assert exact("{{sys.query}}") == "{Q}"


def test_exact_style_replaces_only_the_innermost_braces():
    assert exact("{{ {sys.query} }}") == "{{ Q }}"


def test_exact_style_with_unbalanced_extra_braces_keeps_them():
    assert exact("{{sys.query}") == "{Q"
    assert exact("{sys.query}}") == "Q}"


def test_both_styles_find_the_same_references():
    t = parse_template("x {sys.query} {{A@content}}")
    assert [p for p in t.spliced if isinstance(p, Ref)] == [p for p in t.exact if isinstance(p, Ref)] == list(t.refs)


# --- jinja detection ----------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["{% if x %}y{% endif %}", "{{ name }}", "a }} b", "{{sys.query}}"])
def test_jinja_syntax_is_detected(text):
    assert parse_template(text).has_jinja


def test_single_braced_references_are_not_jinja():
    assert not parse_template("{sys.query} and {A@content}").has_jinja


# --- bare references in params -----------------------------------------------------------------

@pytest.mark.parametrize("text", ["sys.query", "{sys.query}", " {sys.query} ", "Cpn:X@result", "{{Cpn:X@result}}", "env.city"])
def test_params_accept_bare_or_braced_references(text):
    assert looks_like_ref(text)


@pytest.mark.parametrize("text", ["sys.query please", "Agent-1@content", "hello", "", "{ sys.query }x", "a@b c"])
def test_text_that_is_not_a_single_reference_is_not_a_bare_reference(text):
    assert not looks_like_ref(text)


# --- iteration aliases -------------------------------------------------------------------------

def test_iteration_aliases_are_found_only_when_enabled():
    assert exprs("{item} #{index}") == []
    t = parse_template("{item} #{index} {result}", iteration_aliases=True)
    assert t.aliases == ("item", "index", "result")
    assert all(r.name == "" for r in t.refs)


def test_iteration_aliases_follow_the_same_two_styles():
    assert spliced("- {item} -", iteration_aliases=True) == "-I-"
    assert exact("- {item} -", iteration_aliases=True) == "- I -"


def test_aliases_and_references_keep_their_text_order():
    assert exprs("{sys.query} {item} {A@content}", iteration_aliases=True) == ["sys.query", "item", "A@content"]


def test_an_alias_right_after_a_reference_is_still_found():
    # the reference's match takes the space after it, the alias's match the space before it
    assert exact("{sys.query} {item}", iteration_aliases=True) == "Q I"
    assert spliced("{sys.query} {item}", iteration_aliases=True) == "QI"
    assert exact("{item} {sys.query}", iteration_aliases=True) == "I Q"


def test_an_alias_inside_a_reference_is_not_counted_twice():
    assert exprs("{Cpn:item@result}", iteration_aliases=True) == ["Cpn:item@result"]


def test_a_template_with_only_aliases_is_not_literal():
    assert not parse_template("{item}", iteration_aliases=True).is_literal


# --- how the compiler uses them ----------------------------------------------------------------

def test_text_that_only_looks_like_a_reference_is_not_checked():
    doc = dsl(**{"Message:A": cpn("Message", {"content": ["{ sys.nothing } {Agent-1@content} {begin@用户}"]})})
    assert diagnose(doc)[1] == []


def test_aliases_inside_a_container_child_are_not_dangling_references():
    doc = dsl(**{"Iteration:I": cpn("Iteration", {"items_ref": "sys.files"}),
                 "IterationItem:S": cpn("IterationItem", {}, downstream=["Message:A"], parent_id="Iteration:I"),
                 "Message:A": cpn("Message", {"content": ["{item} at {index}"]}, parent_id="Iteration:I")})
    compiled, diags = diagnose(doc)
    assert compiled is not None and diags == []
    refs = compiled.plan.nodes["Message:A"].templates[0].refs
    assert [(r.name, r.key) for r in refs] == [("IterationItem:S", "item"), ("IterationItem:S", "index")]


def test_references_in_extra_braces_are_checked_like_single_braced_ones():
    doc = dsl(**{"Message:A": cpn("Message", {"content": ["{{LLM:Gone@content}}"]})})
    [d] = diagnose(doc)[1]
    assert (d.code, d.field) == ("dangling-reference", "params.content.0")
