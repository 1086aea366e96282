"""The turn's files reach the LLM and the Agent as RAGFlow's `LLM._prepare_prompt_variables` hands them on.

Unless a prompt names `{sys.files}`, the text of each uploaded document is added to the last user
message ("\\n\\n" before each) and each image rides on that message as an image part (a `data:` URI,
the OpenAI `image_url` shape langchain-openai sends as it is); `visual_files_var` names more images, and
an image a prompt names leaves the text to become an image part too. Files go through the real store,
the real Begin that reads them and the scripted model, which records what each request carried.
"""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from canvas2graph.compiler.canvas import compile_dsl, diagnose
from canvas2graph.nodes.llm import to_langchain
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from canvas2graph.runtime.services.file_text import HEADER
from canvas2graph.runtime.services.files import LocalFileStore
from canvas2graph.runtime.services.models import ModelFactory
from canvas2graph.runtime.services.scripted import Script
from canvas2graph.runtime.run.runner import Runner, TurnRequest
from tests.conftest import cpn
from tests.openai_server import OpenAIServer

REPO = Path(__file__).resolve().parents[2]

# a 1x1 PNG
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
NOTE = b"Meeting moved to Friday."
NOTE_TEXT = HEADER.format(name="note.txt") + NOTE.decode()


def canvas(component: str = "LLM", *, message: bool = False, form: dict | None = None, **params) -> dict:
    """begin -> X:A [-> Message:M]; X:A asks "{sys.query}" unless told otherwise."""
    params = {"llm_id": "m@OpenAI", "prompts": [{"role": "user", "content": "{sys.query}"}], "cite": False, **params}
    begin = cpn("Begin", {"mode": "conversational", "inputs": form or {}}, [f"{component}:A"])
    comps = {"begin": begin, f"{component}:A": cpn(component, params, ["Message:M"] if message else [])}
    if message:
        comps["Message:M"] = cpn("Message", {"content": [f"{{{component}:A@content}}"]})
    return {"components": comps}


async def run(dsl: dict, store: LocalFileStore, *, files=None, inputs=None, replies=("Done.",), query="Summarize."):
    script = Script.load({"replies": list(replies)})
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(dsl), saver, ModelFactory(script=script), script, services={"files": store})
        events = [e async for e in runner.run_turn("s", TurnRequest(query=query, files=files, inputs=inputs))]
    errors = [e["data"]["error"] for e in events if e["event"] == "node_finished" and e["data"].get("error")]
    assert not errors, errors
    return events, script


def last_user(request: dict) -> dict:
    return [m for m in request["messages"] if m["role"] == "human"][-1]


def decoded(uri: str) -> tuple[str, bytes]:
    """(mime type, bytes) of a base64 data URI."""
    head, _, payload = uri.partition(",")
    assert head.startswith("data:") and head.endswith(";base64")
    return head[5:-7], base64.b64decode(payload, validate=True)


@pytest.fixture
def store(tmp_path):
    return LocalFileStore(tmp_path / "files")


# --- text ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("message", [False, True], ids=["blocking", "streamed"])
async def test_a_documents_text_is_added_to_the_last_user_message(store, message):
    note = store.put("note.txt", NOTE)
    _, script = await run(canvas(sys_prompt="Be brief.", message=message), store, files=[note])
    [request] = script.requests
    assert request["messages"][0] == {"role": "system", "content": "Be brief."}
    assert last_user(request) == {"role": "human", "content": "Summarize.\n\n" + NOTE_TEXT}


async def test_several_documents_are_joined_after_the_prompt_in_their_order(store):
    files = [store.put("note.txt", NOTE), store.put("b.md", b"# B")]
    _, script = await run(canvas(), store, files=files)
    assert last_user(script.requests[0])["content"] == "\n\n".join(
        ["Summarize.", NOTE_TEXT, HEADER.format(name="b.md") + "# B"])


async def test_the_files_go_to_the_last_user_message_not_to_a_later_assistant_prompt(store):
    prompts = [{"role": "user", "content": "{sys.query}"}, {"role": "assistant", "content": "Noted."}]
    _, script = await run(canvas(prompts=prompts), store, files=[store.put("note.txt", NOTE)])
    assert [(m["role"], m["content"]) for m in script.requests[0]["messages"]] == [
        ("human", "Summarize.\n\n" + NOTE_TEXT), ("ai", "Noted.")]


@pytest.mark.parametrize("where", ["prompt", "sys_prompt"])
async def test_a_prompt_that_names_sys_files_gets_them_there_and_only_there(store, where):
    prompt = "Files: {sys.files}"
    params = ({"prompts": [{"role": "user", "content": prompt}]} if where == "prompt"
              else {"sys_prompt": prompt})
    _, script = await run(canvas(**params), store, files=[store.put("note.txt", NOTE)])
    sent = json.dumps(script.requests[0]["messages"])
    assert sent.count("Meeting moved to Friday.") == 1
    where_it_is = script.requests[0]["messages"][0 if where == "sys_prompt" else -1]["content"]
    assert json.loads(where_it_is.removeprefix("Files: ")) == [NOTE_TEXT]


async def test_files_of_an_earlier_turn_stay_until_new_ones_come_as_in_ragflow(store):
    dsl = canvas()
    script = Script.load({"auto_reply": "ok"})
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(dsl), saver, ModelFactory(script=script), script, services={"files": store})
        [e async for e in runner.run_turn("s", TurnRequest(query="one", files=[store.put("note.txt", NOTE)]))]
        [e async for e in runner.run_turn("s", TurnRequest(query="two"))]
    assert last_user(script.requests[1])["content"] == "two\n\n" + NOTE_TEXT     # sys.files keeps its value


# --- images -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("message", [False, True], ids=["blocking", "streamed"])
async def test_an_image_rides_on_the_last_user_message_as_an_image_part(store, message):
    photo = store.put("photo.png", PNG)
    note = store.put("note.txt", NOTE)
    events, script = await run(canvas(message=message), store, files=[photo, note])
    [request] = script.requests
    user = last_user(request)
    assert user["content"] == "Summarize.\n\n" + NOTE_TEXT            # the image is not in the text
    [image] = user["images"]
    assert decoded(image) == ("image/png", PNG)
    # the component's inputs are what its prompts name, as in RAGFlow
    finished = next(e["data"] for e in events if e["event"] == "node_finished" and e["data"]["component_id"] == "LLM:A")
    assert finished["inputs"] == {"sys.query": "Summarize."}


def test_messages_without_images_stay_plain_text_and_images_become_openai_image_parts():
    plain, with_image = to_langchain([
        {"role": "system", "content": "S"},
        {"role": "user", "content": "Look.", "images": ["data:image/png;base64,AAAA"]}])[0:2]
    assert plain.content == "S"
    assert with_image.content == [{"type": "text", "text": "Look."},
                                  {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
    [only_image] = to_langchain([{"role": "user", "content": "", "images": ["data:image/png;base64,AAAA"]}])
    assert only_image.content == [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]


async def test_an_image_named_by_a_prompt_leaves_the_text_and_is_sent_as_an_image(store):
    form = {"photo": {"type": "file", "name": "Photo", "optional": False}}
    photo = store.put("photo.png", PNG)
    dsl = canvas(form=form, prompts=[{"role": "user", "content": "Describe {begin@photo} please."}])
    _, script = await run(dsl, store, inputs={"photo": {"type": "file", "value": [photo]}})
    user = last_user(script.requests[0])
    assert user["content"] == "Describe [] please."        # RAGFlow prints the list without its images
    assert [decoded(u) for u in user["images"]] == [("image/png", PNG)]


async def test_sys_files_named_in_a_prompt_still_send_their_images_as_images(store):
    files = [store.put("photo.png", PNG), store.put("note.txt", NOTE)]
    _, script = await run(canvas(prompts=[{"role": "user", "content": "{sys.files}"}]), store, files=files)
    user = last_user(script.requests[0])
    assert json.loads(user["content"]) == [NOTE_TEXT]
    assert [decoded(u)[1] for u in user["images"]] == [PNG]


async def test_visual_files_var_names_more_images_and_each_image_is_sent_once(store):
    form = {"photo": {"type": "file", "name": "Photo", "optional": False}}
    other = PNG + b"\x00"                    # another image: other bytes
    photo, shot = store.put("photo.png", PNG), store.put("shot.jpg", other, mime_type="image/jpeg")
    dsl = canvas(form=form, visual_files_var="begin@photo", prompts=[{"role": "user", "content": "Compare."}])
    _, script = await run(dsl, store, inputs={"photo": {"type": "file", "value": [photo]}}, files=[shot, photo])
    user = last_user(script.requests[0])
    assert user["content"] == "Compare."
    # visual_files_var's first, then sys.files' (the same photo again is not sent twice)
    assert [decoded(u) for u in user["images"]] == [("image/png", PNG), ("image/jpeg", other)]


async def test_visual_files_var_with_braces_and_a_bad_one_is_a_compile_error(store):
    _, script = await run(canvas(visual_files_var="{sys.files}", prompts=[{"role": "user", "content": "{sys.files}"}]),
                          store, files=[store.put("photo.png", PNG)])
    assert last_user(script.requests[0])["images"]
    _, diags = diagnose(canvas(visual_files_var="begin@photo.0 and more"))
    assert any(d.field == "params.visual_files_var" and d.severity == "error" for d in diags)
    _, diags = diagnose(canvas(visual_files_var="Nowhere:X@files"))
    assert any(d.field == "params.visual_files_var" and "does not exist" in d.message for d in diags)


async def test_a_prompt_that_is_only_an_image_still_reaches_the_model(store):
    form = {"photo": {"type": "file", "name": "Photo", "optional": False}}
    dsl = canvas(form=form, visual_files_var="begin@photo", prompts=[{"role": "user", "content": "{begin@nothing}"}])
    dsl["components"]["begin"]["obj"]["params"]["inputs"]["nothing"] = {"type": "line", "name": "N", "optional": True}
    _, script = await run(dsl, store, inputs={"photo": {"type": "file", "value": [store.put("p.png", PNG)]}})
    assert last_user(script.requests[0])["content"] == "" and len(last_user(script.requests[0])["images"]) == 1


# --- the Agent ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("message", [False, True], ids=["blocking", "streamed"])
async def test_an_agent_with_tools_sends_the_files_in_every_round_of_its_loop(store, message):
    tool = {"component_name": "Retrieval", "name": "KB", "params": {"dataset_ids": ["kb-1"]}}
    dsl = canvas("Agent", message=message, tools=[tool], sys_prompt="You help.")
    script = {"replies": [{"tool_calls": [{"name": "search_my_dateset_0", "arguments": {"query": "Friday"}}]},
                          "It is on Friday."]}
    files = [store.put("photo.png", PNG), store.put("note.txt", NOTE)]
    s = Script.load({**script, "retrieval": [{"content": "Friday it is.", "docnm_kwd": "d.md", "doc_id": "d"}]})
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(dsl), saver, ModelFactory(script=s), s, services={"files": store})
        events = [e async for e in runner.run_turn("s", TurnRequest(query="When?", files=files))]
    assert events[-1]["data"]["outputs"]["content"].endswith("It is on Friday.")
    first, second = s.requests
    assert first["tools"] == ["search_my_dateset_0"]
    for request in (first, second):          # the user message with its files stays in the loop's history
        user = last_user(request)
        assert user["content"] == "When?\n\n" + NOTE_TEXT
        assert [decoded(u) for u in user["images"]] == [("image/png", PNG)]
    assert second["messages"][-1]["role"] == "tool"


async def test_an_agent_without_tools_is_an_llm_for_files_too(store):
    _, script = await run(canvas("Agent"), store, files=[store.put("photo.png", PNG), store.put("note.txt", NOTE)])
    user = last_user(script.requests[0])
    assert user["content"] == "Summarize.\n\n" + NOTE_TEXT and len(user["images"]) == 1


async def test_a_sub_agent_gets_its_task_with_the_turns_files(store):
    sub = {"component_name": "Agent", "name": "Reader",
           "params": {"llm_id": "m@OpenAI", "sys_prompt": "You read.", "description": "Reads files."}}
    dsl = canvas("Agent", tools=[sub], sys_prompt="You lead.")
    replies = [{"tool_calls": [{"name": "Reader_0", "arguments": {"user_prompt": "read it"}}]}, "It says Friday.",
               "Friday."]
    _, script = await run(dsl, store, files=[store.put("photo.png", PNG), store.put("note.txt", NOTE)],
                          replies=replies)
    sub_request = script.requests[1]
    assert sub_request["component_id"] == "Agent:A-->Reader"
    user = last_user(sub_request)
    assert user["content"] == "read it\n\n" + NOTE_TEXT and len(user["images"]) == 1


# --- end to end: `canvas2graph run --file`, the scripted model, a provider over HTTP ------------------------
def cli(tmp_path: Path, dsl: dict, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    (tmp_path / "agent.json").write_text(json.dumps(dsl))
    base = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy") and not k.startswith("CANVAS2GRAPH_")}
    base.update({"PYTHONPATH": str(REPO), "CANVAS2GRAPH_FILES_DIR": str(tmp_path / "files"), **(env or {})})
    return subprocess.run([sys.executable, "-m", "canvas2graph.cli", *args], cwd=REPO, env=base, capture_output=True,
                          text=True, timeout=120)


def uploads(tmp_path: Path) -> list[str]:
    (tmp_path / "note.txt").write_bytes(NOTE)
    (tmp_path / "photo.png").write_bytes(PNG)
    return ["--file", str(tmp_path / "photo.png"), "--file", str(tmp_path / "note.txt")]


def test_run_with_files_and_a_scripted_model_and_the_trace_shows_what_the_model_got(tmp_path):
    (tmp_path / "script.json").write_text(json.dumps({"auto_reply": "Friday."}))
    session = ["--session", "s1", "--db", str(tmp_path / "s.db")]
    done = cli(tmp_path, canvas(), "run", str(tmp_path / "agent.json"), "--query", "When?", "--format", "jsonl",
               "--llm-script", str(tmp_path / "script.json"), *session, *uploads(tmp_path))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["data"]["outputs"]["content"] == "Friday."
    traced = cli(tmp_path, canvas(), "trace", *session, "--dsl", str(tmp_path / "agent.json"))
    assert traced.returncode == 0, traced.stderr
    [step] = [s for s in json.loads(traced.stdout)["turns"][0]["steps"] if s["component_id"] == "LLM:A"]
    # the trace keeps each image as its type and size, not its bytes
    uri = "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert step["messages"] == [{"role": "user", "content": "When?\n\n" + NOTE_TEXT,
                                 "images": [f"data:image/png;base64,… ({len(uri)} characters)"]}]


@pytest.mark.parametrize("component, message", [("LLM", True), ("LLM", False), ("Agent", True)],
                         ids=["llm-streamed", "llm-blocking", "agent-streamed"])
def test_langchain_openai_sends_the_text_and_the_image_part_to_the_provider(tmp_path, component, message):
    dsl = canvas(component, message=message, llm_id="my-vision@OpenAI-API-Compatible")
    with OpenAIServer(["A cat on Friday."]) as server:
        env = {"OPENAI_API_COMPATIBLE_BASE_URL": server.url, "OPENAI_API_COMPATIBLE_API_KEY": "sk-local"}
        done = cli(tmp_path, dsl, "run", str(tmp_path / "agent.json"), "--query", "What is this?", "--format",
                   "jsonl", "--db", str(tmp_path / "s.db"), *uploads(tmp_path), env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["data"]["outputs"]["content"] == "A cat on Friday."
    [request] = server.requests
    [user] = [m for m in request["body"]["messages"] if m["role"] == "user"]
    text, image = user["content"]
    assert text == {"type": "text", "text": "What is this?\n\n" + NOTE_TEXT}
    assert image["type"] == "image_url" and decoded(image["image_url"]["url"]) == ("image/png", PNG)
