"""The agent templates canvas2graph ships: its demos and RAGFlow's, installed with the package, and
`canvas2graph templates list|export|create`."""
from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import zipfile

from canvas2graph.server.backend.store import open_store
from canvas2graph.server.backend.templates import find_template, templates
from tests import forkserver
from tests.conftest import REPO, shared_dir

def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*forkserver.python(), "-m", "canvas2graph.cli", *args], cwd=REPO, capture_output=True,
                          text=True)


def test_the_demos_come_first_then_ragflows_templates():
    found = templates()
    assert [t.name for t in found if t.source == "canvas2graph"] == ["data_analyst", "support_desk"]
    assert len([t for t in found if t.source == "ragflow"]) == 8
    assert found[0].source == "canvas2graph" and all(isinstance(t.id, str) for t in found)
    assert find_template("DEEP_RESEARCH").id == "1" and find_template("c2g-support-desk").name == "support_desk"
    assert find_template("nope") is None


def test_the_demo_templates_are_the_demo_fixtures():
    for name in ("support_desk", "data_analyst"):
        assert find_template(name).dsl == json.loads((REPO / "fixtures" / "demo" / f"{name}.json").read_text())


def test_ragflows_templates_are_shipped_unchanged_with_their_notice_and_licence():
    folder = REPO / "canvas2graph" / "templates" / "ragflow"
    for source in sorted((shared_dir() / "ragflow" / "templates").glob("*.json")):
        assert (folder / source.name).read_bytes() == source.read_bytes(), source.name
    notice = (folder / "NOTICE").read_text()
    assert "InfiniFlow" in notice and "Apache License, Version 2.0" in notice and "b1b8cd62" in notice
    assert "Apache License" in (folder / "LICENSE").read_text()


def test_a_wheel_carries_the_templates(tmp_path):
    for part in ("canvas2graph", "compiler", "nodes", "runtime", "server"):
        shutil.copytree(REPO / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, tmp_path / name)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", str(tmp_path), "--no-deps", "--no-build-isolation",
                            "-q", "-w", str(tmp_path / "dist")], capture_output=True, text=True, cwd=tmp_path)
    assert built.returncode == 0, built.stderr[-2000:]
    [wheel] = (tmp_path / "dist").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {f"canvas2graph/templates/{t.source}/{t.name}.json" for t in templates()}
    assert shipped <= names
    assert {"canvas2graph/templates/ragflow/NOTICE", "canvas2graph/templates/ragflow/LICENSE"} <= names


# --- the command --------------------------------------------------------------------------------------
def test_list_and_export(tmp_path):
    listed = cli("templates", "list", "--format", "json")
    assert listed.returncode == 0
    deep = find_template("deep_research")
    assert {"name": "deep_research", "id": "1", "source": "ragflow", "title": "Deep research",
            "canvas_type": deep.document["canvas_type"]} in json.loads(listed.stdout)
    out = tmp_path / "desk.json"
    assert cli("templates", "export", "support_desk", "-o", str(out)).returncode == 0
    assert cli("compile", str(out)).returncode == 0
    missing = cli("templates", "export", "no-such-template")
    assert missing.returncode == 2 and "no template 'no-such-template'" in missing.stderr and "deep_research" in missing.stderr


def test_create_stores_an_agent_with_its_first_version(tmp_path):
    db = str(tmp_path / "server.db")
    # RAGFlow's SEO writer leaves its models for the user to choose: --default-llm fills them in
    made = cli("templates", "create", "market_seo_article_writer", "--tenant", "ops", "--db", db,
               "--default-llm", "gpt-4o-mini@OpenAI")
    assert made.returncode == 0, made.stderr
    agent_id = made.stdout.strip()
    again = cli("templates", "create", "market_seo_article_writer", "--tenant", "ops", "--db", db)
    assert again.returncode == 2 and "already exists" in again.stderr
    titled = cli("templates", "create", "12", "--tenant", "ops", "--db", db, "--title", "SEO without a model")
    assert titled.returncode == 0 and "does not compile yet" in titled.stderr

    async def stored():
        async with open_store(db) as store:
            agent = await store.get_agent("ops", agent_id)
            return agent, await store.list_versions("ops", agent_id), await store.latest_version("ops", agent_id)
    agent, versions, latest = asyncio.run(stored())
    template = find_template("market_seo_article_writer")
    assert agent.title == template.text("title") and agent.canvas_type == template.document["canvas_type"]
    assert len(versions) == 1 and versions[0].created_by == "ops" and latest.diagnostics["compiles"] is True
