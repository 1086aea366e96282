"""`POST /api/v1/graphs/export` draws the graph: SVG and PNG with their content types (the same picture
as `canvas2graph export`), DOT source; a server without Graphviz says what to install."""
from __future__ import annotations

import io
import xml.etree.ElementTree as ET

from PIL import Image

from tests.compiler.test_picture import BRANCHES, TYPES, desk_dsl, groups, texts, title, tooltip
from tests.conftest import require_graphviz
from tests.server.helpers import Api, Server, make_token


def test_svg_comes_as_an_svg_document_with_every_component_and_branch(alice):
    require_graphviz()
    response = alice.http.post("/graphs/export", json={"dsl": desk_dsl(), "format": "svg"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "image/svg+xml"
    svg = ET.fromstring(response.content)
    assert {tooltip(g) for g in groups(svg, "node") if title(g) != "__finish__"} == set(TYPES)
    assert {t for g in groups(svg, "edge") for t in texts(g)} == BRANCHES
    assert [title(c) for c in groups(svg, "cluster")] == ["cluster_Iteration.Each"]


def test_png_comes_as_a_png_image_named_after_a_template_title(alice):
    require_graphviz()
    response = alice.http.post("/graphs/export", json={"dsl": {"title": "Desk router", "dsl": desk_dsl()},
                                                       "format": "png"})
    assert response.status_code == 200 and response.headers["content-type"] == "image/png"
    image = Image.open(io.BytesIO(response.content))
    image.load()
    assert image.format == "PNG" and image.size[0] > 100 and image.size[1] > 100
    dot = alice.http.post("/graphs/export", json={"dsl": {"title": "Desk router", "dsl": desk_dsl()}, "format": "dot"})
    assert dot.headers["content-type"].startswith("text/vnd.graphviz")
    assert "<B>Desk router</B>" in dot.text and 'subgraph "cluster_Iteration.Each"' in dot.text


def test_a_dsl_that_does_not_compile_gets_its_diagnostics_not_a_picture(alice):
    response = alice.http.post("/graphs/export", json={"dsl": {"components": {}}, "format": "svg"})
    assert response.status_code == 400 and response.json()["code"] == 102


def test_an_unknown_format_is_refused_with_the_ones_there_are(alice):
    response = alice.http.post("/graphs/export", json={"dsl": desk_dsl(), "format": "gif"})
    assert response.status_code == 400 and response.json()["code"] == 101
    assert "svg" in response.json()["message"] and "png" in response.json()["message"]


def test_a_server_without_graphviz_answers_503_saying_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")          # no `dot` for the server process
    db = str(tmp_path / "server.db")
    with Server(db, tmp_path) as server:
        api = Api(server, make_token(db, "carol"))
        try:
            response = api.http.post("/graphs/export", json={"dsl": desk_dsl(), "format": "png"})
            assert response.status_code == 503 and response.json()["code"] == 103
            assert "apt-get install graphviz" in response.json()["message"]
            assert api.ok("POST", "/graphs/export", {"dsl": desk_dsl()})["mermaid"].startswith("flowchart")
        finally:
            api.close()
