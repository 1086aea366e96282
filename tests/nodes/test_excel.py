"""ExcelProcessor reads uploaded workbooks (xlsx, xls, csv) from the run's file store, merges, transforms and
writes them, with RAGFlow's outputs (data, summary, markdown, attachment)."""
from __future__ import annotations

import io
from pathlib import Path

import openpyxl
import pytest

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from canvas2graph.runtime.services.files import LocalFileStore
from canvas2graph.runtime.services.models import ModelFactory
from canvas2graph.runtime.services.scripted import Script
from canvas2graph.runtime.run.runner import Runner, TurnRequest
from tests.conftest import cpn, dsl
from tests.nodes.helpers import errors

DATA = Path(__file__).parent / "data"


def workbook(**sheets: list[list]) -> bytes:
    book = openpyxl.Workbook()
    book.remove(book.active)
    for name, rows in sheets.items():
        sheet = book.create_sheet(name)
        for row in rows:
            sheet.append(row)
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


SALES = workbook(Q1=[["region", "total"], ["north", 10], ["south", 5]],
                 Q2=[["region", "total"], ["north", 7], ["east", None]])
PRICES = workbook(Prices=[["sku", "price"], ["A1", 19.5], ["B2", 25.0], ["Z9", 1.0]])


@pytest.fixture
def store(tmp_path):
    return LocalFileStore(tmp_path / "files")


async def run(params: dict, *, files=None, inputs=None, tmp_path, store, extra=None, component="ExcelProcessor:X") -> dict:
    """One turn of Begin -> ExcelProcessor -> Message: the ExcelProcessor's (or `component`'s) node_finished data."""
    begin = cpn("Begin", {"mode": "task", "inputs": {"sheet": {"type": "file", "name": "Sheet", "optional": True},
                                                     "rows": {"type": "object", "name": "Rows", "optional": True}}},
                downstream=["ExcelProcessor:X"])
    source = dsl(begin=begin, **{"ExcelProcessor:X": cpn("ExcelProcessor", params, ["Message:M"]),
                                 "Message:M": cpn("Message", {"content": ["{ExcelProcessor:X@summary}"]})})
    script = Script.load({"auto_reply": "ok"})
    services = {"files": store, "code": {"artifacts_dir": str(tmp_path / "artifacts")}, **(extra or {})}
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(source), saver, ModelFactory(script=script), script, services=services)
        events = [e async for e in runner.run_turn("s", TurnRequest(inputs=inputs, files=files))]
    return next(e["data"] for e in events if e["event"] == "node_finished" and e["data"]["component_id"] == component)


async def test_read_gives_rows_per_sheet_a_summary_and_markdown_tables(tmp_path, store):
    entry = store.put("sales.xlsx", SALES)
    data = await run({"input_files": ["{begin@sheet}"]}, inputs={"sheet": {"type": "file", "value": [entry]}},
                     tmp_path=tmp_path, store=store)
    out = data["outputs"]
    assert out["data"] == {"sales.xlsx_Q1": [{"region": "north", "total": 10}, {"region": "south", "total": 5}],
                           "sales.xlsx_Q2": [{"region": "north", "total": 7.0}, {"region": "east", "total": None}]}
    assert out["summary"] == ("**sales.xlsx_Q1**: 2 rows, 2 columns (region, total)\n"
                              "**sales.xlsx_Q2**: 2 rows, 2 columns (region, total)")
    assert out["markdown"].startswith("### sales.xlsx_Q1\n\n| region   |   total |\n|:---------|--------:|\n| north    |      10 |")
    assert data["inputs"]["{begin@sheet}"].startswith("[{'id': ")


async def test_sheet_selection_first_or_by_name(tmp_path, store):
    entry = store.put("sales.xlsx", SALES)
    first = await run({"input_files": ["sys.files"], "sheet_selection": "first"}, files=[entry], tmp_path=tmp_path, store=store)
    assert list(first["outputs"]["data"]) == ["sales.xlsx"]          # one sheet: keyed by the file alone
    named = await run({"input_files": ["sys.files"], "sheet_selection": "Q2, Nope"}, files=[entry], tmp_path=tmp_path,
                      store=store)
    assert named["outputs"]["data"] == {"sales.xlsx": [{"region": "north", "total": 7.0}, {"region": "east", "total": None}]}


async def test_xls_and_csv_files_are_read_too(tmp_path, store):
    xls = store.put("stock.xls", (DATA / "stock.xls").read_bytes())
    csv = store.put("extra.csv", "sku,name,stock\nD4,Fan,3\n".encode())
    data = await run({"input_files": ["sys.files"]}, files=[xls, csv], tmp_path=tmp_path, store=store)
    out = data["outputs"]["data"]
    assert out["stock.xls"][2] == {"sku": "C3", "name": "水壶", "stock": 7.0}
    assert out["extra.csv"] == [{"sku": "D4", "name": "Fan", "stock": 3}]


async def test_merge_stacks_every_sheet_or_joins_on_a_column(tmp_path, store):
    sales, prices = store.put("sales.xlsx", SALES), store.put("prices.xlsx", PRICES)
    stacked = await run({"input_files": ["sys.files"], "operation": "merge"}, files=[sales], tmp_path=tmp_path, store=store)
    assert stacked["outputs"]["summary"] == "Merged 2 sources into 4 rows, 2 columns"
    assert [r["region"] for r in stacked["outputs"]["data"]["merged"]] == ["north", "south", "north", "east"]
    stock = store.put("stock.xls", (DATA / "stock.xls").read_bytes())
    joined = await run({"input_files": ["sys.files"], "operation": "merge", "merge_strategy": "join", "join_on": "sku"},
                       files=[stock, prices], tmp_path=tmp_path, store=store)
    rows = {r["sku"]: r for r in joined["outputs"]["data"]["merged"]}
    assert rows["A1"] == {"sku": "A1", "name": "Kettle", "stock": 12.0, "price": 19.5}
    assert rows["Z9"]["name"] is None and rows["C3"]["price"] is None          # an outer join
    assert joined["outputs"]["markdown"].startswith("| sku   | name")
    missing = await run({"input_files": ["sys.files"], "operation": "merge", "merge_strategy": "join", "join_on": "id"},
                        files=[stock, prices], tmp_path=tmp_path, store=store)
    assert "cannot join on 'id': sheet Stock of stock.xls has no such column" in missing["error"]


async def test_transform_turns_referenced_rows_into_tables(tmp_path, store):
    rows = {"type": "object", "value": '{"north": [{"total": 10}], "south": [{"total": 5}]}'}
    data = await run({"operation": "transform", "transform_data": "{begin@rows}"}, inputs={"rows": rows},
                     tmp_path=tmp_path, store=store)
    out = data["outputs"]
    assert out["data"] == {"north": [{"total": 10}], "south": [{"total": 5}]}
    assert out["markdown"] == "### north\n\n|   total |\n|--------:|\n|      10 |\n\n### south\n\n|   total |\n|--------:|\n|       5 |"
    assert out["summary"] == "Transformed data ready for processing"


@pytest.mark.parametrize("fmt", ["xlsx", "csv"])
async def test_output_writes_a_workbook_stored_as_an_artifact(tmp_path, store, fmt):
    rows = {"type": "object", "value": '{"Totals": [{"region": "north", "total": 17}], "Notes": [{"text": "ok"}]}'}
    data = await run({"operation": "output", "transform_data": "begin@rows", "output_format": fmt,
                      "output_filename": "report"}, inputs={"rows": rows}, tmp_path=tmp_path, store=store)
    out = data["outputs"]
    attachment = out["attachment"]
    assert (attachment["format"], attachment["file_name"]) == (fmt, f"report.{fmt}")
    stored = tmp_path / "artifacts" / attachment["url"].rsplit("/", 1)[-1]
    assert attachment["url"] == stored.resolve().as_uri() and attachment["doc_id"] == stored.stem
    if fmt == "xlsx":
        book = openpyxl.load_workbook(stored)
        assert book.sheetnames == ["Totals", "Notes"]
        assert [list(r) for r in book["Totals"].iter_rows(values_only=True)] == [["region", "total"], ["north", 17]]
    else:
        assert stored.read_text() == "region,total\nnorth,17\n"
    assert out["summary"] == f"Generated report.{fmt} with 2 sheet(s), 2 total rows"


async def test_unreadable_files_and_other_tenants_files_are_errors(tmp_path, store):
    text = store.put("notes.xlsx", b"not a workbook")
    bad = await run({"input_files": ["sys.files"]}, files=[text], tmp_path=tmp_path, store=store)
    assert "cannot read notes.xlsx as a spreadsheet" in bad["error"]
    theirs = store.put("sales.xlsx", SALES, created_by="other")
    # the run reads what the request brings at its start (Begin), and refuses another tenant's file there
    refused = await run({"input_files": ["sys.files"]}, files=[theirs], tmp_path=tmp_path, store=store,
                        extra={"tenant": "mine"}, component="begin")
    assert refused["error"] == f"sys.files: file {theirs['id']} does not belong to this tenant"
    # an entry reaching ExcelProcessor some other way (an object input here) is refused by ExcelProcessor
    smuggled = await run({"input_files": ["{begin@rows}"]}, inputs={"rows": theirs}, tmp_path=tmp_path, store=store,
                         extra={"tenant": "mine"})
    assert smuggled["error"] == f"{{begin@rows}}: file {theirs['id']} does not belong to this tenant"


async def test_nothing_to_read_says_so(tmp_path, store):
    data = await run({"input_files": ["{begin@sheet}"]}, tmp_path=tmp_path, store=store)
    assert data["outputs"]["summary"] == "No Excel files found" and data["outputs"]["markdown"] == "No data"


def test_params_are_checked():
    assert "operation" in errors("ExcelProcessor", {"operation": "pivot"})[0].message
    assert "output_format" in errors("ExcelProcessor", {"output_format": "ods"})[0].message
    assert errors("ExcelProcessor", {"input_files": ["{Missing:X@file}"]})
