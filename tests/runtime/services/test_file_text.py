"""What components read of an uploaded file: RAGFlow's parsed content (a header and the text, or an image's
data URI), built from the file's bytes; and how a read file prints in prompts and messages."""
from __future__ import annotations

import base64
import io

import docx
import openpyxl
import pytest

from canvas2graph.nodes.documents import Layout, render
from canvas2graph.runtime.services.file_text import HEADER, file_content, with_contents
from canvas2graph.runtime.services.files import FileStoreError, LoadedFile, LocalFileStore
from canvas2graph.runtime.graph.values import as_json_text, as_python_text


def loaded(name: str, data: bytes, mime: str) -> LoadedFile:
    return LoadedFile(name=name, data=data, mime_type=mime)


def text_of(name: str, data: bytes, mime: str = "application/octet-stream") -> str:
    content = file_content(loaded(name, data, mime))
    head = HEADER.format(name=name)
    assert content.startswith(head)
    return content[len(head):]


def test_an_image_is_its_data_uri_as_ragflow_hands_it_to_vision_models():
    png = b"\x89PNG\r\n\x1a\n" + b"0" * 8
    assert file_content(loaded("chart.png", png, "image/png")) == "data:image/png;base64," + base64.b64encode(png).decode()


def test_a_workbook_reads_as_one_markdown_table_per_sheet():
    book = openpyxl.Workbook()
    book.active.title = "Q1"
    book.active.append(["region", "total"])
    book.active.append(["north", 10])
    book.create_sheet("Q2").append(["region"])
    buffer = io.BytesIO()
    book.save(buffer)
    assert text_of("sales.xlsx", buffer.getvalue()) == ("Sheet: Q1\n| region | total |\n|---|---|\n| north | 10 |\n\n"
                                                       "Sheet: Q2\n| region |\n|---|")
    assert text_of("t.csv", b"a,b\n1,x|y\n", "text/csv") == "| a | b |\n|---|---|\n| 1 | x\\|y |"


def test_word_pdf_html_and_text_files_read_as_their_text():
    document = docx.Document()
    document.add_paragraph("Minutes of the meeting")
    table = document.add_table(rows=2, cols=2)
    for (r, c), value in {(0, 0): "who", (0, 1): "what", (1, 0): "Ann", (1, 1): "notes"}.items():
        table.cell(r, c).text = value
    buffer = io.BytesIO()
    document.save(buffer)
    assert text_of("m.docx", buffer.getvalue()) == "Minutes of the meeting\n| who | what |\n|---|---|\n| Ann | notes |"
    pdf = render("pdf", "# Report\n\nSales rose in the north.", Layout(title="r", timestamp=""))
    assert "Sales rose in the north." in text_of("r.pdf", pdf, "application/pdf")
    html = b"<html><script>evil()</script><body><p>Hello</p><p>world</p></body></html>"
    assert text_of("page.html", html, "text/html").split() == ["Hello", "world"]
    assert text_of("notes.md", "# Caf\u00e9".encode()) == "# Caf\u00e9"
    assert text_of("legacy.txt", "\u4e2d\u6587".encode("gb18030")) == "\u4e2d\u6587"      # RAGFlow's users write Chinese too


def test_a_file_without_a_reader_or_a_damaged_one_says_so():
    assert text_of("talk.mp3", b"ID3", "audio/mpeg") == "(the content of talk.mp3 is not read here: audio/mpeg files have no text reader)"
    assert text_of("broken.xlsx", b"not a zip").startswith("(the content of broken.xlsx cannot be read: ")


def test_with_contents_reads_each_entry_once_and_keeps_other_values(tmp_path):
    store = LocalFileStore(tmp_path)
    entry = store.put("a.txt", b"alpha", created_by="acme")
    [read] = with_contents([entry], store, "acme")
    assert read == {**entry, "content": HEADER.format(name="a.txt") + "alpha"}
    assert with_contents([read, "text", 3], store, "acme") == [read, "text", 3]     # read entries are not read again
    with pytest.raises(FileStoreError, match="does not belong to this tenant"):
        with_contents(entry, store, "other")


def test_a_read_file_prints_as_its_content_as_ragflows_parsed_files_do(tmp_path):
    store = LocalFileStore(tmp_path)
    files = with_contents([store.put("a.txt", b"alpha"), store.put("b.txt", b"beta")], store)
    contents = [HEADER.format(name="a.txt") + "alpha", HEADER.format(name="b.txt") + "beta"]
    assert as_json_text(files) == as_json_text(contents)         # a JSON list of the contents, as RAGFlow prints it
    assert as_json_text(files[0]) == contents[0]
    assert as_python_text(files) == str(contents)
    assert as_json_text([{"id": 1, "content": "x"}]) == '[{"id": 1, "content": "x"}]'    # other dicts print as ever
