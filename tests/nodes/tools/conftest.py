"""Fixtures for the web tools: a fake service on 127.0.0.1 and an environment without real keys or URLs."""
from __future__ import annotations

import pytest

from tests.nodes.tools.support import FakeService

SERVICE_ENV = ["TAVILY_API_KEY", "SERPAPI_API_KEY", "CANVAS2GRAPH_TOOL_TIMEOUT", "CANVAS2GRAPH_SEARXNG_URL",
               "CANVAS2GRAPH_CRAWLER_ALLOW_PRIVATE", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
               "http_proxy", "https_proxy", "all_proxy"]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    """No key, proxy or service URL leaks in from the machine running the tests."""
    for name in SERVICE_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def fake():
    service = FakeService().start()
    yield service
    service.stop()
