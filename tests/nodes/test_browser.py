"""The Browser drives a real Chromium (Debian's, through Playwright) over pages served on 127.0.0.1, with the
scripted model choosing each action; every request passes the host guard; downloads land in the file
store and uploads come from it."""
from __future__ import annotations

import os
import shutil

import pytest

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from canvas2graph.runtime.services.files import LocalFileStore
from canvas2graph.runtime.services.scripted import Script
from canvas2graph.runtime.run.runner import Runner, TurnRequest
from tests.conftest import cpn, dsl
from tests.nodes.helpers import errors
from tests.nodes.tools.support import FakeService, RecordingFactory, RecordingModel, Reply

if not shutil.which("chromium") and not os.path.exists("/usr/bin/chromium"):
    if os.environ.get("CI") == "true":
        pytest.fail("Debian's chromium must be installed in CI (.ci/run installs it)", pytrace=False)
    pytest.skip("Chromium is not installed (apt-get install chromium)", allow_module_level=True)

HOME = """<html><head><title>Shop</title></head><body><h1>Kettle shop</h1>
<a href="/kettle">The steel kettle</a> <a href="/report.csv">Price list</a>
<form action="/search" method="get"><input name="q" placeholder="Search"><button>Go</button></form>
<form action="/upload" method="post" enctype="multipart/form-data"><input type="file" name="doc">
<button>Send</button></form></body></html>"""
KETTLE = "<html><head><title>Steel kettle</title></head><body><p>The steel kettle costs 42 euros.</p></body></html>"


@pytest.fixture
def site():
    service = FakeService().start()
    service.on("GET", "/", Reply(200, HOME, "text/html"))
    service.on("GET", "/kettle", Reply(200, KETTLE, "text/html"))
    service.on("GET", "/old", Reply(302, "", headers={"Location": "/kettle"}))
    service.on("GET", "/search", lambda req: Reply(200, f"<p>Results for {req.arg('q')}: 3 kettles</p>", "text/html"))
    service.on("GET", "/report.csv", Reply(200, "item,price\nkettle,42\n", "text/csv",
                                            headers={"Content-Disposition": 'attachment; filename="prices.csv"'}))
    service.on("POST", "/upload", lambda req: Reply(200, f"<p>Received {len(req.body)} bytes</p>", "text/html"))
    yield service
    service.stop()


@pytest.fixture
def private_ok(monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_BROWSER_ALLOW_PRIVATE", "1")


def call(name: str, **args) -> dict:
    return {"tool_calls": [{"name": name, "arguments": args}]}


async def browse(replies: list, tmp_path, *, params: dict | None = None, query: str = "Find the kettle's price",
                 browser: dict | None = None, store=None) -> tuple[dict, list]:
    """One turn of Begin -> Browser; (its node_finished data, the messages of every model call)."""
    source = dsl(**{"Browser:B": cpn("Browser", {"llm_id": "m@OpenAI", "persist_session": False, **(params or {})})})
    script = Script.load({"by_component": {"Browser:B": replies}})
    RecordingModel.calls = []
    services = {"files": store or LocalFileStore(tmp_path / "files"),
                "browser": {"profiles_dir": str(tmp_path / "profiles"), **(browser or {})}}
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(source), saver, RecordingFactory(script), script, services=services)
        events = [e async for e in runner.run_turn("s", TurnRequest(query=query))]
    data = next(e["data"] for e in events if e["event"] == "node_finished" and e["data"]["component_id"] == "Browser:B")
    return data, RecordingModel.calls


def tool_results(calls) -> list[str]:
    last = calls[-1]
    return [m.content for m in last if m.type == "tool"]


async def test_the_model_opens_a_page_follows_a_link_and_answers(site, tmp_path, private_ok):
    data, calls = await browse([call("go_to_url", url=f"{site.url}/"), call("click_element", index=0),
                                call("done", text="The steel kettle costs 42 euros.", success=True)], tmp_path)
    assert data["error"] is None
    assert data["outputs"]["content"] == "The steel kettle costs 42 euros."
    assert data["outputs"]["downloaded_files"] == []
    assert [r.path for r in site.requests if r.path != "/favicon.ico"] == ["/", "/kettle"]
    first_page = calls[1][-1].content                   # what the model read after opening the home page
    assert "[0] <a href=\"/kettle\"> The steel kettle" in first_page and "Title: Shop" in first_page
    assert "[2] <input name=\"q\" placeholder=\"Search\">" in first_page
    assert "The steel kettle costs 42 euros." in calls[2][-1].content
    assert calls[0][1].content.startswith("Task:\nFind the kettle's price")


async def test_forms_are_filled_and_redirects_followed(site, tmp_path, private_ok):
    data, calls = await browse([call("go_to_url", url=f"{site.url}/old"), call("go_to_url", url=f"{site.url}/"),
                                call("input_text", index=2, text="steel", press_enter=True),
                                "Three kettles match."], tmp_path)
    assert data["outputs"]["content"] == "Three kettles match."       # a reply without an action is the answer
    assert "URL: " + site.url + "/kettle" in calls[1][-1].content
    assert "Results for steel: 3 kettles" in calls[3][-1].content
    assert [r.arg("q") for r in site.requests if r.path == "/search"] == ["steel"]


async def test_downloads_land_in_the_file_store(site, tmp_path, private_ok):
    store = LocalFileStore(tmp_path / "files")
    data, _ = await browse([call("go_to_url", url=f"{site.url}/"), call("click_element", index=1),
                            call("done", text="Downloaded the price list.")], tmp_path, store=store)
    [file] = data["outputs"]["downloaded_files"]
    assert (file["name"], file["size"], file["parent_id"]) == ("prices.csv", 21, "local")
    assert store.get(file["file_id"]) == b"item,price\nkettle,42\n"


async def test_uploads_come_from_the_file_store(site, tmp_path, private_ok):
    store = LocalFileStore(tmp_path / "files")
    entry = store.put("invoice.txt", b"invoice 123")
    data, calls = await browse([call("go_to_url", url=f"{site.url}/"), call("upload_file", index=4, path="invoice.txt"),
                                call("click_element", index=5), call("done", text="Sent.")], tmp_path,
                               params={"upload_sources": [entry]}, store=store)
    assert data["outputs"]["content"] == "Sent."
    assert "You can upload files from these local paths" in calls[0][1].content and entry["id"] in calls[0][1].content
    [upload] = [r for r in site.requests if r.path == "/upload"]
    assert b"invoice 123" in upload.body and b'filename="invoice.txt"' in upload.body


async def test_the_host_guard_refuses_private_addresses(site, tmp_path):
    data, calls = await browse([call("go_to_url", url=f"{site.url}/"), call("done", text="I could not open it.")],
                               tmp_path)
    assert data["outputs"]["content"] == "I could not open it."
    [result] = tool_results(calls)
    assert "Refused by the host guard" in result and "CANVAS2GRAPH_BROWSER_ALLOW_PRIVATE" in result
    assert site.requests == []                          # nothing reached the server


async def test_file_urls_and_unknown_actions_are_refused_in_words(site, tmp_path, private_ok):
    data, calls = await browse([call("go_to_url", url="file:///etc/passwd"), call("fly", to="moon"),
                                call("done", text="Stopped.")], tmp_path)
    first, second = tool_results(calls)
    assert first.startswith("go_to_url failed: 'file:///etc/passwd' is not an http:// or https:// URL")
    assert second.startswith("fly is not a browser action")


async def test_the_steps_run_out_with_an_empty_answer(site, tmp_path, private_ok):
    data, _ = await browse([call("go_to_url", url=f"{site.url}/"), call("scroll")], tmp_path, params={"max_steps": 2})
    assert data["error"] is None and data["outputs"]["content"] == ""


async def test_a_run_that_does_not_allow_browsing_is_refused(tmp_path):
    data, _ = await browse([call("done", text="x")], tmp_path, browser={"allow": False})
    assert "running a browser is switched off here" in data["error"] and "--allow-browser" in data["error"]


async def test_a_persistent_session_keeps_its_profile(site, tmp_path, private_ok):
    await browse([call("done", text="ok")], tmp_path, params={"persist_session": True})
    profiles = list((tmp_path / "profiles" / "local").glob("dsl_*/Browser_B"))
    assert len(profiles) == 1 and any(profiles[0].iterdir())


def test_params_are_checked():
    assert "max_steps" in str(errors("Browser", {"llm_id": "m@OpenAI", "max_steps": 0})[0])
    assert "llm_id is empty" in errors("Browser", {"llm_id": ""})[0].message
    assert "prompts is empty" in errors("Browser", {"llm_id": "m@OpenAI", "prompts": " "})[0].message
