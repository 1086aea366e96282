"""Parser: each file family read by its library into RAGFlow's output shapes; services named when missing."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

from tests.nodes.pipeline.helpers import node, run

ALL_JSON = {"setups": {
    "pdf": {"parse_method": "plain_text", "suffix": ["pdf"], "output_format": "json"},
    "docx": {"suffix": ["docx"], "output_format": "json"},
    "markdown": {"suffix": ["md"], "output_format": "json"},
    "text&code": {"suffix": ["txt", "py"], "output_format": "json"},
    "html": {"suffix": ["html"], "output_format": "json"},
    "spreadsheet": {"suffix": ["xlsx", "csv"], "output_format": "json"},
    "slides": {"suffix": ["pptx"], "output_format": "json"},
    "epub": {"suffix": ["epub"], "output_format": "json"},
    "email": {"suffix": ["eml"], "output_format": "json", "fields": ["from", "subject", "body", "attachments"]},
}}


def parse(tmp_path: Path, name: str, data: bytes, params=None) -> dict:
    path = tmp_path / name
    path.write_bytes(data)
    out, _ = run(node("Parser", params or ALL_JSON), {"name": name, "file": {"name": name}},
                 file={"name": name, "path": str(path)})
    return out


def test_text_and_code_keep_delimiters_and_group_lines(tmp_path):
    out = parse(tmp_path, "a.txt", b"First line.\nSecond line!\n")
    assert out["output_format"] == "json"
    # each piece keeps the delimiter after it, pieces joined by "\n" (the last "\n" follows an empty piece)
    assert out["json"] == [{"text": "First line.\n\nSecond line!", "doc_type_kwd": "text"}]


def test_markdown_sections_follow_headings_and_tables_are_table_items(tmp_path):
    md = b"# Title\n\nIntro.\n\n## Part\n\nBody.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    out = parse(tmp_path, "a.md", md)
    assert [i["text"] for i in out["json"]] == ["# Title\nIntro.", "## Part\nBody.", "| a | b |\n|---|---|\n| 1 | 2 |"]
    assert [i["doc_type_kwd"] for i in out["json"]] == ["text", "text", "table"]


def test_html_drops_scripts_and_styles(tmp_path):
    out = parse(tmp_path, "a.html", b"<style>p{}</style><script>x()</script><h1>Head</h1><p>Para <b>bold</b></p>")
    assert out["json"] == [{"text": "Head\nPara bold", "doc_type_kwd": "text"}]


def test_docx_paragraphs_tables_and_outlines(tmp_path):
    import docx
    d = docx.Document()
    d.add_heading("Policy", 1)
    d.add_paragraph("Body text.")
    t = d.add_table(rows=1, cols=2)
    t.cell(0, 0).text, t.cell(0, 1).text = "a", "<b>"
    buf = io.BytesIO()
    d.save(buf)
    out = parse(tmp_path, "p.docx", buf.getvalue())
    assert out["json"] == [{"text": "Policy", "image": None, "doc_type_kwd": "text"},
                           {"text": "Body text.", "image": None, "doc_type_kwd": "text"},
                           {"text": "<table><tr><td>a</td><td>&lt;b&gt;</td></tr></table>", "image": None,
                            "doc_type_kwd": "table"}]
    assert out["file"]["outlines"] == [["Policy", 1, 0]]


def test_pdf_plain_text_is_one_item_per_line(tmp_path):
    from reportlab.pdfgen import canvas
    buf = io.BytesIO()
    c = canvas.Canvas(buf)
    c.drawString(72, 720, "Page one.")
    c.showPage()
    c.drawString(72, 720, "Page two.")
    c.save()
    out = parse(tmp_path, "m.pdf", buf.getvalue())
    # every line of pypdf's text, blank ones too, as RAGFlow's PlainParser (the chunkers skip them)
    assert [i["text"] for i in out["json"] if i["text"]] == ["Page one.", "Page two."] and out["pages"] == 2
    assert out["json"][0]["layout_type"] == "text"


def test_spreadsheets_rows_as_header_value_pairs_or_html(tmp_path):
    out = parse(tmp_path, "t.csv", b"name,age\nAda,36\n")
    assert out["json"] == [{"text": "name: Ada; age: 36", "doc_type_kwd": "text"}]
    html = parse(tmp_path, "t.csv", b"name,age\nAda,36\n", {"setups": {"spreadsheet": {"suffix": ["csv"],
                                                                                     "output_format": "html"}}})
    assert html["html"].startswith("<table><caption>t.csv</caption><tr><th>name</th><th>age</th></tr><tr><td>Ada</td>")


def test_slides_one_item_per_slide(tmp_path):
    import pptx
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Roadmap"
    slide.placeholders[1].text = "Ship it"
    buf = io.BytesIO()
    deck.save(buf)
    out = parse(tmp_path, "d.pptx", buf.getvalue())
    assert out["json"] == [{"text": "Roadmap\nShip it", "doc_type_kwd": "text"}]


def test_email_fields_and_body(tmp_path):
    eml = (b"From: a@example.com\nTo: b@example.com\nSubject: Hello\nContent-Type: text/plain\n\nThe body.\n")
    out = parse(tmp_path, "m.eml", eml)
    assert out["json"] == [{"from": "a@example.com", "subject": "Hello", "text": "The body.\n", "attachments": []}]


def test_an_unknown_extension_and_a_service_method_fail_the_file_naming_why(tmp_path):
    with pytest.raises(ValueError, match=r"No suitable for file extension: `\.exe`"):
        parse(tmp_path, "x.exe", b"MZ")
    with pytest.raises(ValueError, match="DeepDoc"):
        parse(tmp_path, "x.pdf", b"%PDF", {"setups": {"pdf": {"parse_method": "DeepDOC", "suffix": ["pdf"],
                                                               "output_format": "json"}}})


def test_families_at_the_top_of_params_are_read_as_setups_and_services_are_warnings():
    from canvas2graph.compiler.canvas import diagnose
    doc = {"components": {
        "File": {"obj": {"component_name": "File", "params": {}}, "downstream": ["Parser:A"]},
        "Parser:A": {"obj": {"component_name": "Parser", "params": {
            "pdf": {"parse_method": "MinerU", "suffix": ["pdf"], "output_format": "json"},
            "image": {"parse_method": "ocr", "suffix": ["png"], "output_format": "text"},
            "markdown": {"suffix": ["md"], "output_format": "json"}}}, "downstream": []}}}
    compiled, diags = diagnose(doc)
    assert compiled is not None
    assert {(d.code, d.field) for d in diags} == {("needs-service", "params.setups.pdf"),
                                                 ("needs-service", "params.setups.image")}
    assert "MinerU" in next(d.message for d in diags if d.field.endswith("pdf"))
    assert set(compiled.plan.nodes["Parser:A"].params.setups) == {"pdf", "image", "markdown"}


def test_an_invalid_output_format_is_a_compile_error():
    from canvas2graph.compiler.canvas import diagnose
    doc = {"components": {
        "File": {"obj": {"component_name": "File", "params": {}}, "downstream": ["Parser:A"]},
        "Parser:A": {"obj": {"component_name": "Parser", "params": {"setups": {
            "html": {"suffix": ["html"], "output_format": "markdown"}}}}, "downstream": []}}}
    _, diags = diagnose(doc)
    assert [(d.code, d.component_id) for d in diags] == [("invalid-param", "Parser:A")]
    assert "setups.html.output_format 'markdown'" in diags[0].message
