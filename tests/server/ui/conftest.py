"""A real `canvas2graph serve` and Debian's Chromium driven by Playwright, for the run inspector's tests.

Screenshots go to tests/artifacts/ui/ (git-ignored; CANVAS2GRAPH_UI_ARTIFACTS moves them): one per page
the tests visit, and one for each failing test, taken as it failed.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.server.helpers import REPO, Server, make_token

CHROMIUM = os.environ.get("CANVAS2GRAPH_CHROMIUM") or "/usr/bin/chromium"
ARTIFACTS = Path(os.environ.get("CANVAS2GRAPH_UI_ARTIFACTS") or REPO / "tests" / "artifacts" / "ui")

# Short answers stream in a few pieces 100 ms apart (long enough to see a component running); LLM:Slow's
# answer takes about 4 s (40 pieces), long enough to cancel; LLM:Fails's provider fails; LLM:Md answers in
# Markdown after some reasoning; Categorize:Route always picks "yes"; `by_message` routes the support desk.
MARKDOWN_ANSWER = ("## Plan\n\n| step | owner |\n|---|---|\n| draft | **Ann** |\n\nRun `make docs` and read "
                   "[the guide](https://example.com/guide).")
UI_SCRIPT = {
    "by_component": {"LLM:Slow": [" ".join(f"word{i}" for i in range(40))],
                     "LLM:Fails": [{"error": "the provider is down"}],
                     "LLM:Md": [{"content": MARKDOWN_ANSWER, "reasoning": "The user wants a plan."}] * 5,
                     "Categorize:Route": ["yes"] * 20},
    # fixtures/ui/support_router.json: Categorize:Triage picks by the question (rules are never used up; a
    # Categorize's message holds the conversation, so the words are ones no answer or category says);
    # LLM:LegalReview fails with a Markdown error (RAGFlow's "**ERROR**: ..." style); LLM:Sleepy takes ~4 s
    "by_message": [
        {"component": "Categorize:Triage", "match": r"\bbuy\b", "reply": "sales"},
        {"component": "Categorize:Triage", "match": r"\bcontract\b", "reply": "legal"},
        {"component": "Categorize:Triage", "match": r"\bcharged twice\b", "reply": "billing"},
        {"component": "Categorize:Triage", "match": r".", "reply": "smalltalk"},
        {"component": "LLM:LegalReview", "match": r".", "reply": {"error": "**ERROR**: the review service is `down`"}},
        {"component": "LLM:Sleepy", "match": r".", "reply": " ".join(f"slow{i}" for i in range(40))},
    ],
    "auto_reply": "Answer {n} from {component}.",
    "stream_chunks": 60,
    "chunk_interval_ms": 100,
}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture(scope="module")
def ui_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ui")
    # the first retrieval loads RAGFlow's tokenizer; on a busy machine that outlasts the default 12 s
    (tmp / "retrieval.toml").write_text("timeout = 120\n")
    env = {**os.environ, "CANVAS2GRAPH_RETRIEVAL_CONFIG": str(tmp / "retrieval.toml")}
    with Server(str(tmp / "server.db"), tmp, UI_SCRIPT, env=env) as running:
        yield running


@pytest.fixture(scope="module")
def alice_token(ui_server):
    return make_token(ui_server.db, "alice")


@pytest.fixture(scope="module")
def bob_token(ui_server):
    return make_token(ui_server.db, "bob")


_WIPED = False


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).is_file():
        reason = f"no Chromium at {CHROMIUM} (Debian's `chromium` package; .ci/run installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright
    global _WIPED
    if ARTIFACTS.is_dir() and not _WIPED:            # this run's screenshots only (every module's)
        for old in ARTIFACTS.glob("*.png"):
            old.unlink(missing_ok=True)      # the other xdist worker may wipe it first
    _WIPED = True
    with sync_playwright() as playwright:
        # Chromium's own sandbox needs user namespaces, which a root CI container does not give
        args = ["--no-sandbox"] if os.geteuid() == 0 else []
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=args)
        yield browser
        browser.close()


class Browsing:
    """A page in a fresh browser context (its own sessionStorage), with what the page logged."""

    def __init__(self, browser, server, name: str, width: int = 1280):
        self.context = browser.new_context(viewport={"width": width, "height": 800}, accept_downloads=True)
        self.page = self.context.new_page()
        self.page.set_default_timeout(20_000)
        self.server, self.name = server, name
        self.errors: list[str] = []         # uncaught exceptions, and anything the CSP refused
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("console", lambda m: self.errors.append(m.text) if "Content Security Policy" in m.text else None)

    def shot(self, what: str, full_page: bool = True) -> Path:
        """A screenshot of the whole page, or of the window as it is scrolled (`full_page=False`: a
        whole-page picture lays the page out again, which loses the scroll of a panel)."""
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{self.name}-{what}.png"
        self.page.screenshot(path=str(path), full_page=full_page)
        return path

    def sign_in(self, token: str) -> None:
        self.page.goto(self.server.url + "/")
        self.page.get_by_label("API token").fill(token)
        self.page.get_by_role("button", name="Sign in").click()
        self.page.get_by_role("heading", name="Agents", exact=True).wait_for()


@pytest.fixture
def browsing(browser, ui_server, request):
    opened: list[Browsing] = []

    def open_page(suffix: str = "", width: int = 1280) -> Browsing:
        b = Browsing(browser, ui_server, request.node.name + suffix, width)
        opened.append(b)
        return b

    yield open_page
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for b in opened:
        if failed:
            try:
                print(f"screenshot of the failure: {b.shot('failure')}")
            except Exception as e:      # noqa: BLE001 - the page may be gone; the test's own error matters
                print(f"no screenshot of the failure: {e}")
        b.context.close()
