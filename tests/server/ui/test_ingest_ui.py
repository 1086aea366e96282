"""The ingestion page (server/ui/web/src/ingest.jsx), in Chromium: a pipeline DSL and documents in, the
pipeline lighting up on the canvas for the document being ingested, every document's outcome with its
progress log (RAGFlow's per-component progress, message and elapsed time), and the totals."""
from __future__ import annotations

from playwright.sync_api import expect

from tests.server.helpers import REPO

PIPELINE = REPO / "fixtures" / "kb" / "pipeline.json"
DOCS = REPO / "fixtures" / "kb" / "docs"


def test_ingesting_shows_each_documents_progress_and_outcome_and_the_pipeline_on_the_canvas(
        browsing, ui_server, alice_token, tmp_path):
    odd = tmp_path / "scan.png"
    odd.write_bytes(b"\x89PNG\r\n\x1a\n not really")
    b = browsing()
    b.sign_in(alice_token)
    b.page.get_by_role("link", name="Ingest").click()
    b.page.get_by_role("heading", name="Ingest documents").wait_for()
    ingest = b.page.get_by_role("button", name="Ingest", exact=True)
    expect(ingest).to_be_disabled()                 # nothing to ingest yet

    b.page.get_by_label("Dataset id").fill("ui-kb")
    b.page.get_by_label("Pipeline DSL (.json)").set_input_files(str(PIPELINE))
    b.page.get_by_label("Documents", exact=True).set_input_files([str(DOCS / "refunds.md"), str(DOCS / "warranty.txt"), str(odd)])
    # the pipeline is drawn before it runs, every component waiting
    states = b.page.locator("ol.states li")
    expect(states).to_have_count(4)
    expect(b.page.locator("ol.states li[data-state=waiting]")).to_have_count(4)
    ingest.click()

    totals = b.page.locator("#ingest-totals")
    expect(totals).to_contain_text("2 ingested, 0 unchanged, 1 failed", timeout=120_000)
    rows = b.page.locator("table.ingest-files > tbody > tr")
    expect(rows).to_have_count(3)
    expect(b.page.locator("tr[data-file='refunds.md']")).to_have_attribute("data-state", "done")
    expect(b.page.locator("tr[data-file='refunds.md']")).to_contain_text("chunk")
    expect(b.page.locator("tr[data-file='warranty.txt']")).to_have_attribute("data-state", "done")
    failed = b.page.locator("tr[data-file='scan.png']")
    expect(failed).to_have_attribute("data-state", "failed")
    expect(failed).to_contain_text("No suitable for file extension: `.png`")
    # the canvas shows the last document's run: its Parser failed, nothing after it ran
    expect(b.page.get_by_role("heading", name="Pipeline: scan.png")).to_be_visible()
    expect(b.page.locator("ol.states li[data-component='File']")).to_have_attribute("data-state", "done")
    parser = b.page.locator("ol.states li[data-state=error]")
    expect(parser).to_have_count(1)
    expect(parser).to_contain_text("No suitable for file extension")
    expect(b.page.locator(".c2g-node.state-error")).to_have_count(1)

    # a document's progress log: each component's progress, message and elapsed time
    row = b.page.locator("tr[data-file='refunds.md']")
    row.locator("summary").click()
    log = row.get_by_role("table", name="Progress of refunds.md")
    expect(log.locator("tbody tr").filter(has_text="Done")).to_have_count(4)
    expect(log.locator("tbody tr").first).to_contain_text("File")
    expect(log).to_contain_text("100 %")
    b.shot("ingested")

    # again: the ingested documents are unchanged, the odd one fails again
    ingest.click()
    expect(totals).to_contain_text("0 ingested, 2 unchanged, 1 failed", timeout=120_000)
    expect(b.page.locator("tr[data-file='refunds.md']")).to_have_attribute("data-state", "skipped")
    expect(b.page.locator("tr[data-file='refunds.md']")).to_contain_text("unchanged")
    b.shot("again")
    assert b.errors == []


def test_a_pipeline_that_does_not_compile_shows_its_diagnostics(browsing, ui_server, alice_token, tmp_path):
    import json
    broken = json.loads(PIPELINE.read_text())
    dsl = broken.get("dsl", broken)
    dsl["components"]["TokenChunker:Chunks"]["obj"]["params"]["chunk_token_size"] = -1
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken))
    not_json = tmp_path / "not.json"
    not_json.write_text('{"components": ')
    b = browsing()
    b.sign_in(alice_token)
    b.page.goto(f"{ui_server.url}/#/ingest")
    b.page.get_by_label("Pipeline DSL (.json)").set_input_files(str(not_json))
    expect(b.page.locator("#ingest-pipeline-error")).to_contain_text("Not valid JSON")
    b.page.get_by_label("Dataset id").fill("ui-kb2")
    b.page.get_by_label("Pipeline DSL (.json)").set_input_files(str(path))
    b.page.get_by_label("Documents", exact=True).set_input_files(str(DOCS / "refunds.md"))
    b.page.get_by_role("button", name="Ingest", exact=True).click()
    expect(b.page.get_by_role("heading", name="The ingestion did not run")).to_be_visible()
    table = b.page.get_by_role("table", name="Diagnostics")
    expect(table.locator("tr[data-component='TokenChunker:Chunks']").first).to_be_visible()
    b.shot("diagnostics")
    assert b.errors == []
