"""DocGenerator writes Markdown (with references) as PDF, DOCX, TXT, Markdown or HTML with RAGFlow's layout
params; each format is read back with its own reader. The file is stored as an artifact and a Message
that shows `download` offers it in message_end.downloads."""
from __future__ import annotations

import base64
import io
import json
import os
from pathlib import Path

import docx
import pytest
from pypdf import PdfReader

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.nodes.documents.fonts import pdf_fonts
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from canvas2graph.runtime.services.models import ModelFactory
from canvas2graph.runtime.services.scripted import Script
from canvas2graph.runtime.run.runner import Runner, TurnRequest
from tests.conftest import cpn, dsl
from tests.nodes.helpers import errors

REPORT = """# 季度报告 Quarterly report

Sales grew in **every** region; see the [dashboard](https://example.com/d).

## Regions

| Region | Total |
|---|---:|
| north | 10 |
| 南方 | 5 |

- first point
- second point

```
total = 15
```
"""
LONG = REPORT + "\n".join(f"\nParagraph {n}: the quarter went well in region {n}." for n in range(120))


async def generate(params: dict, tmp_path: Path, query: str = "", show: str | None = None, replies=()) -> list[dict]:
    downstream = ["Message:M"] if show else []
    comps = {"DocGenerator:D": cpn("DocGenerator", params, downstream)}
    if show:
        comps["Message:M"] = cpn("Message", {"content": [show]})
    script = Script.load({"replies": list(replies)})
    services = {"code": {"artifacts_dir": str(tmp_path / "artifacts"), "artifact_url": "/api/v1/documents/artifact"}}
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(dsl(**comps)), saver, ModelFactory(script=script), script, services=services)
        return [e async for e in runner.run_turn("s", TurnRequest(query=query))]


def finished(events, cid="DocGenerator:D") -> dict:
    return next(e["data"] for e in events if e["event"] == "node_finished" and e["data"]["component_id"] == cid)


def stored(out: dict, tmp_path: Path) -> bytes:
    info = json.loads(out["download"])
    data = (tmp_path / "artifacts" / info["preview_url"].rsplit("/", 1)[-1]).read_bytes()
    assert base64.b64decode(info["base64"]) == data and out["size"] == len(data) == info["size"]
    return data


LAYOUT = {"header_text": "ACME 机密 confidential", "footer_text": "Finance team", "watermark_text": "DRAFT"}


async def test_pdf_has_the_text_the_decorations_on_every_page_and_renders_cjk(tmp_path):
    events = await generate({"output_format": "pdf", "content": LONG, "filename": "q3/report?.pdf", **LAYOUT}, tmp_path)
    out = finished(events)["outputs"]
    assert (out["filename"], out["mime_type"]) == ("q3 report.pdf", "application/pdf")
    reader = PdfReader(io.BytesIO(stored(out, tmp_path)))
    pages = [p.extract_text() for p in reader.pages]
    assert len(pages) >= 3
    assert "季度报告 Quarterly report" in pages[0] and "南方" in pages[0] and "Paragraph 119" in pages[-1]
    for n, text in enumerate(pages, start=1):
        assert "ACME 机密 confidential" in text and "Finance team" in text and f"Page {n}" in text
        assert "DRAFT" in text and "Generated: " in text
    embedded = {reader.get_object(f)["/BaseFont"] for page in reader.pages for f in page["/Resources"]["/Font"].values()}
    if not pdf_fonts().cjk_embedded:
        if os.environ.get("CI") == "true":
            pytest.fail("CI must have a CJK TrueType font (.ci/run installs fonts-wqy-microhei)")
        pytest.skip("no CJK TrueType font on this machine (apt-get install fonts-wqy-microhei)")
    # the CJK font is embedded (a subset, "ABCDEF+Name"), not only named for the reader to substitute
    assert any("+" in name and "DejaVu" not in name for name in embedded), embedded


async def test_pdf_without_decorations_and_with_a_larger_font_has_more_pages(tmp_path):
    plain = await generate({"output_format": "pdf", "content": LONG, "add_page_numbers": False, "add_timestamp": False},
                           tmp_path)
    big = await generate({"output_format": "pdf", "content": LONG, "font_size": 18}, tmp_path)
    plain_pages = PdfReader(io.BytesIO(stored(finished(plain)["outputs"], tmp_path))).pages
    big_pages = PdfReader(io.BytesIO(stored(finished(big)["outputs"], tmp_path))).pages
    assert "Page 1" not in plain_pages[0].extract_text() and "Generated" not in plain_pages[0].extract_text()
    assert len(big_pages) > len(plain_pages)
    assert finished(plain)["outputs"]["filename"].startswith("document_")


async def test_docx_has_headings_table_header_footer_and_watermark(tmp_path):
    events = await generate({"output_format": "docx", "content": REPORT, "filename": "report", "font_size": 14, **LAYOUT},
                            tmp_path)
    out = finished(events)["outputs"]
    assert out["filename"] == "report.docx"
    document = docx.Document(io.BytesIO(stored(out, tmp_path)))
    headings = [(p.style.name, p.text) for p in document.paragraphs if p.style.name.startswith("Heading")]
    assert headings == [("Heading 1", "季度报告 Quarterly report"), ("Heading 2", "Regions")]
    assert document.styles["Normal"].font.size.pt == 14 and document.styles["Heading 1"].font.size.pt == 20
    assert [[c.text for c in row.cells] for row in document.tables[0].rows] == [["Region", "Total"], ["north", "10"],
                                                                                 ["南方", "5"]]
    assert [p.text for p in document.paragraphs if p.style.name == "List Bullet"] == ["first point", "second point"]
    section = document.sections[0]
    assert section.header.paragraphs[0].text == "ACME 机密 confidential"
    assert 'string="DRAFT"' in section.header._element.xml
    footer = section.footer.paragraphs[0]
    assert footer.text.startswith("Finance team\tGenerated: ") and footer.text.endswith("\tPage 1")
    assert "PAGE" in footer._p.xml and "dashboard" in document.paragraphs[1].text


async def test_text_formats_carry_the_timestamp_first_and_html_is_a_whole_page(tmp_path):
    txt = finished(await generate({"output_format": "txt", "content": REPORT}, tmp_path))["outputs"]
    text = stored(txt, tmp_path).decode()
    assert text.startswith("Generated: ") and "季度报告 Quarterly report" in text and "**" not in text
    assert "- first point" in text and "    total = 15" in text and txt["mime_type"] == "text/plain"
    md = finished(await generate({"output_format": "markdown", "content": REPORT, "add_timestamp": False}, tmp_path))
    assert stored(md["outputs"], tmp_path).decode() == REPORT.strip() + "\n"
    assert md["outputs"]["filename"].endswith(".md") and md["outputs"]["mime_type"] == "text/markdown"
    html = finished(await generate({"output_format": "html", "content": REPORT + "\n<script>alert(1)</script>\n",
                                    **LAYOUT}, tmp_path))["outputs"]
    page = stored(html, tmp_path).decode()
    assert page.startswith("<!DOCTYPE html>") and "<h1>季度报告 Quarterly report</h1>" in page
    assert '<header class="doc-header">ACME 机密 confidential</header>' in page and "DRAFT" in page
    assert "<script>" not in page and "&lt;script&gt;" in page         # raw HTML in the content is text


async def test_references_are_filled_in_and_thinking_dropped(tmp_path):
    params = {"output_format": "markdown", "add_timestamp": False,
              "content": "# Answer\n\n{LLM:Writer@content}\n\nAsked: {sys.query}"}
    comps = {"LLM:Writer": cpn("LLM", {"llm_id": "m@OpenAI", "sys_prompt": "write", "prompts": [
        {"role": "user", "content": "{sys.query}"}]}, ["DocGenerator:D"]),
             "DocGenerator:D": cpn("DocGenerator", params)}
    script = Script.load({"replies": [{"content": "The answer is 42.", "reasoning": "let me think"}]})
    services = {"code": {"artifacts_dir": str(tmp_path / "artifacts")}}
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(dsl(**comps)), saver, ModelFactory(script=script), script, services=services)
        events = [e async for e in runner.run_turn("s", TurnRequest(query="what is it?"))]
    text = stored(finished(events)["outputs"], tmp_path).decode()
    assert text == "# Answer\n\nThe answer is 42.\n\nAsked: what is it?\n"


async def test_a_message_showing_download_offers_the_file_instead_of_printing_it(tmp_path):
    events = await generate({"output_format": "txt", "content": "hello"}, tmp_path,
                            show="Your file: {DocGenerator:D@download}")
    end = next(e["data"] for e in events if e["event"] == "message_end")
    [offered] = end["downloads"]
    out = finished(events)["outputs"]
    assert offered["doc_id"] == out["doc_id"] and offered["filename"] == out["filename"]
    assert offered["preview_url"] == f"/api/v1/documents/artifact/{out['doc_id']}.txt"
    assert "include_download_info_in_content" not in offered
    assert finished(events, "Message:M")["outputs"]["content"] == "Your file:"     # RAGFlow drops spaces by refs
    shown = await generate({"output_format": "txt", "content": "hello", "include_download_info_in_content": True},
                           tmp_path, show="{DocGenerator:D@download}")
    content = finished(shown, "Message:M")["outputs"]["content"]
    assert json.loads(content)["filename"].endswith(".txt")


async def test_content_that_resolves_to_nothing_still_gives_a_file(tmp_path):
    events = await generate({"output_format": "txt", "content": "{sys.user_id}", "add_timestamp": False}, tmp_path)
    out = finished(events)["outputs"]
    assert stored(out, tmp_path) == b"\n" and out["size"] == 1          # as RAGFlow's pandoc writes it


def test_params_are_checked_as_ragflow_checks_them():
    assert "content is empty" in errors("DocGenerator", {"content": " "})[0].message
    assert "font_size must be at least 12" in errors("DocGenerator", {"content": "x", "font_size": 10})[0].message
    assert "output_format" in errors("DocGenerator", {"content": "x", "output_format": "odt"})[0].message
