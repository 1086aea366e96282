"""Browser: a model operates a real Chromium to do a task on the web (SPEC 3.16).

RAGFlow runs the browser-use library; this runs its own loop (`agent.py`) over a Playwright-driven
Chromium (`session.py`): the model is the component's `llm_id`, the task is `prompts` (references
filled in), and it may take up to `max_steps` steps. Files named by `upload_sources` (uploaded file
entries or ids, or http(s) URLs, fetched through the host guard) are offered for upload; files the
pages download are kept in the run's file store (`canvas2graph.runtime.services.files`).

Outputs, as RAGFlow's: `content` (the model's final answer, "" when the steps ran out) and
`downloaded_files` (`[{file_id, name, size, mime_type, parent_id}]`). Params: the LLM's (`llm_id`,
`sys_prompt`, sampling), `prompts` ("{sys.query}"), `max_steps` (30), `headless`, `chromium_sandbox`
(False: Chromium's sandbox needs user namespaces that containers rarely give), `persist_session`
(True: the profile, cookies included, is kept per tenant, canvas and node) and `upload_sources`;
`enable_default_extensions` is accepted and ignored (no extensions are ever downloaded).

Running a browser can be switched off (`policy.py`): a server refuses it unless started with
`--allow-browser`. Every request goes through the host guard (`network.py`).
"""
from __future__ import annotations

import hashlib
import json
import mimetypes
import os
import re
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

from pydantic import ConfigDict, Field, field_validator

from canvas2graph.compiler.dsl.refs import looks_like_ref, parse_ref
from canvas2graph.nodes.base import Node, Result, settle_pending
from canvas2graph.nodes.browser.policy import EXTRAS_KEY, BrowserPolicy, BrowserRefused
from canvas2graph.nodes.llm import NEW_COMPONENT, LLMParams
from canvas2graph.nodes.registry import register
from canvas2graph.runtime.services.files import LOCAL_OWNER, FileStoreError, is_file_entry, load_files, store_for
from canvas2graph.runtime.graph.values import ReferenceError_, as_json_text, render, resolve

MAX_REDIRECTS = 5


class BrowserParams(LLMParams):
    # a new Browser starts with the LLM's sampling values; its prompt is one text (RAGFlow's initialBrowserValues)
    model_config = ConfigDict(json_schema_extra={"x-initial": {k: v for k, v in NEW_COMPONENT.items() if k != "prompts"}})

    prompts: Any = "{sys.query}"
    max_steps: int = Field(30, gt=0)
    headless: bool = True
    enable_default_extensions: bool = False
    chromium_sandbox: bool = False
    persist_session: bool = True
    upload_sources: Any = Field(default_factory=list)
    outputs: Any = Field(default_factory=lambda: {"content": {"type": "string", "value": ""},
                                                  "downloaded_files": {"type": "Array<Object>", "value": []}})

    @field_validator("prompts", mode="before")
    @classmethod
    def _prompts(cls, v: Any) -> Any:
        if isinstance(v, list):           # the LLM's message list shape: its user turns are the task
            v = "\n".join(str(p.get("content", "")) for p in v if isinstance(p, dict))
        if not isinstance(v, str) or not v.strip():
            raise ValueError("prompts is empty: describe the task for the browser (references allowed)")
        return v


@register("Browser", BrowserParams, outputs=lambda p: {"content", "downloaded_files"})
class Browser(Node):
    thoughts_text = "Planning and executing browser actions..."
    reports_own_failure = True      # RAGFlow's Browser catches its failures and sets _ERROR itself

    # --- compile time -------------------------------------------------------------------
    def prepare(self) -> None:
        self.task = self.text_template(self.params.prompts)
        self.upload_refs = _braced_refs(self.params.upload_sources)

    def references(self):
        return ([("params.prompts", r) for r in self.task.refs]
                + [("params.upload_sources", r) for r in self.upload_refs.values()])

    # --- run time ------------------------------------------------------------------------
    async def run(self, state, ctx) -> Result:
        extras = getattr(ctx, "extras", None) or {}
        policy = BrowserPolicy.resolve(extras.get(EXTRAS_KEY))
        if not policy.allow:
            raise BrowserRefused("running a browser is switched off here (a server allows it with --allow-browser; "
                                 "CANVAS2GRAPH_ALLOW_BROWSER=0 switches it off)")
        state, writes = await settle_pending(self, [*self.task.refs, *self.upload_refs.values()], state, ctx)
        task = render(self.task, state)
        inputs = {r.expr: as_json_text(_value(state, r)) for r in self.task.refs}
        for expr, ref in self.upload_refs.items():
            inputs[expr] = as_json_text(_value(state, ref))
        store, tenant = store_for(extras), extras.get("tenant")
        owner = tenant or LOCAL_OWNER
        model = ctx.models.chat_model(self.params.llm_id, component_id=self.id, gen_conf=self.params.gen_conf())
        from canvas2graph.nodes.browser.agent import browse
        from canvas2graph.nodes.browser.session import BrowserSession
        with tempfile.TemporaryDirectory(prefix="c2g-browser-up-") as up, \
                tempfile.TemporaryDirectory(prefix="c2g-browser-down-") as down:
            uploads = await self._prepare_uploads(state, ctx, store, tenant, Path(up), policy)
            if uploads:
                task += "\n\nYou can upload files from these local paths when operating web pages:\n" + "\n".join(
                    f"- file_id={u['file_id']}, name={u['name']}, local_path={u['local_path']}" for u in uploads)
            profile = self._profile_dir(policy, owner) if self.params.persist_session else None
            session = BrowserSession(policy, ctx, download_dir=Path(down), profile_dir=profile,
                                     headless=self.params.headless, sandbox=self.params.chromium_sandbox,
                                     upload_paths=[u["local_path"] for u in uploads])
            async with session:
                answer = await browse(model, session, task, self.params.max_steps, sys_prompt=self.params.sys_prompt)
            downloaded = []
            for path in session.downloads:
                if not path.is_file() or path.stat().st_size == 0:
                    continue
                entry = store.put(path.name, path.read_bytes(), created_by=owner)
                downloaded.append({"file_id": entry["id"], "name": entry["name"], "size": entry["size"],
                                   "mime_type": entry["mime_type"], "parent_id": owner})
        return Result(outputs={"content": answer, "downloaded_files": downloaded}, inputs=inputs, writes=writes)

    def _profile_dir(self, policy: BrowserPolicy, owner: str) -> Path:
        """The kept profile of this node of this canvas, for this tenant (RAGFlow's layout)."""
        canvas = hashlib.sha1(",".join(sorted(self.canvas.entries)).encode()).hexdigest()[:12]
        path = policy.profiles_path / _segment(owner) / f"dsl_{canvas}" / _segment(self.id)
        path.mkdir(parents=True, exist_ok=True)
        return path

    async def _prepare_uploads(self, state, ctx, store, tenant, folder: Path, policy: BrowserPolicy) -> list[dict]:
        prepared: list[dict] = []
        for source in _sources(self.params.upload_sources, state, self.upload_refs):
            if isinstance(source, str) and source.startswith(("http://", "https://")):
                name, data = await _download(source, ctx, policy)
                file_id = ""
            else:
                try:
                    if isinstance(source, str):
                        owner = tenant or LOCAL_OWNER
                        entry = getattr(store, "entry", lambda *a: None)(source, owner) or {}
                        source = {"id": source, "name": entry.get("name") or source, "created_by": owner}
                    [loaded] = load_files(source, store, tenant)
                except (FileStoreError, ValueError) as e:
                    raise FileStoreError(f"upload_sources: {e}") from None
                name, data, file_id = loaded.name, loaded.data, loaded.file_id
            path = _free_path(folder, name)
            path.write_bytes(data)
            prepared.append({"file_id": file_id, "name": name, "size": len(data), "local_path": str(path)})
        return prepared


def _braced_refs(sources: Any) -> dict[str, Any]:
    """{expr: Ref} for the `{...}` references among upload_sources (RAGFlow resolves braced ones only)."""
    found = {}
    for item in sources if isinstance(sources, list) else [sources]:
        if isinstance(item, str) and item.strip().startswith("{") and looks_like_ref(item):
            ref = parse_ref(item)
            found[ref.expr] = ref
    return found


def _sources(raw: Any, state, refs: dict[str, Any]) -> list:
    """File entries, ids and URLs named by upload_sources, references resolved, duplicates dropped."""
    out: list = []

    def collect(item: Any) -> None:
        if item is None:
            return
        if isinstance(item, str):
            token = item.strip()
            if not token:
                return
            if token.startswith("{") and looks_like_ref(token):
                ref = refs.get(parse_ref(token).expr)
                collect(_value(state, ref) if ref is not None else None)
            elif token.startswith("["):
                try:
                    collect(json.loads(token))
                except ValueError:
                    out.append(token)
            elif token.startswith(("http://", "https://")):
                out.append(token)
            elif "," in token:
                for part in token.split(","):
                    collect(part)
            else:
                out.append(token)
        elif isinstance(item, dict):
            if is_file_entry(item):
                out.append(item)
            elif "url" in item or "value" in item:
                collect(item.get("url") or item.get("value"))
        elif isinstance(item, (list, tuple)):
            for v in item:
                collect(v)
    collect(raw)
    unique, seen = [], set()
    for s in out:
        key = json.dumps(s, sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            unique.append(s)
    return unique


async def _download(url: str, ctx, policy: BrowserPolicy) -> tuple[str, bytes]:
    """An upload source given as a URL, fetched through the host guard (each redirect checked too)."""
    from canvas2graph.nodes.browser.network import guarded_fetch
    for _ in range(MAX_REDIRECTS + 1):
        fetched = await guarded_fetch("GET", url, {"User-Agent": "canvas2graph-browser"}, None, ctx,
                                      timeout=policy.action_timeout, max_bytes=policy.max_body_bytes)
        location = fetched.header("location")
        if fetched.status in (301, 302, 303, 307, 308) and location:
            url = urljoin(url, location)
            continue
        if fetched.status >= 400 or not fetched.body:
            raise FileStoreError(f"upload_sources: {url} answered HTTP {fetched.status} with "
                                 f"{len(fetched.body)} bytes")
        return _url_filename(url, fetched.headers), fetched.body
    raise FileStoreError(f"upload_sources: {url} redirects more than {MAX_REDIRECTS} times")


def _url_filename(url: str, headers: list[tuple[str, str]]) -> str:
    disposition = next((v for k, v in headers if k.lower() == "content-disposition"), "")
    match = re.search(r"filename\*\s*=\s*(?:UTF-8'')?([^;]+)", disposition, re.I) or \
        re.search(r'filename\s*=\s*"?([^";]+)"?', disposition, re.I)
    if match:
        name = os.path.basename(unquote(match.group(1).strip().strip('"')))
        if name:
            return name
    name = os.path.basename(unquote(urlsplit(url).path))
    if name:
        return name
    kind = next((v for k, v in headers if k.lower() == "content-type"), "").split(";")[0]
    return "download" + (mimetypes.guess_extension(kind) or ".bin")


def _free_path(folder: Path, name: str) -> Path:
    name = os.path.basename(name) or "file"
    path, n = folder / name, 1
    while path.exists():
        path = folder / f"{Path(name).stem}_{n}{Path(name).suffix}"
        n += 1
    return path


def _segment(value: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(value or "")).strip("._-") or "unknown"


def _value(state, ref) -> Any:
    try:
        return resolve(state, ref)
    except ReferenceError_:
        return None
