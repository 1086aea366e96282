"""One SQLite-backed server per test module, and two tenants on it (alice and bob)."""
from __future__ import annotations

import pytest

from tests.server.sdk027 import sdk027_python  # noqa: F401 - the fixture, for every test of the server

from tests.server.helpers import Api, Server, make_token


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("server")
    db = str(tmp / "server.db")
    with Server(db, tmp) as running:
        yield running


@pytest.fixture(scope="module")
def alice(server):
    api = Api(server, make_token(server.db, "alice"))
    yield api
    api.close()


@pytest.fixture(scope="module")
def bob(server):
    api = Api(server, make_token(server.db, "bob"))
    yield api
    api.close()
