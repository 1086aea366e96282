"""`canvas2graph eval`: an agent run over a dataset's rows, each scored, with tokens, cost, latency
percentiles and progress; `--compare` shows the rows where two versions differ."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from canvas2graph.cli import main
from tests.conftest import cpn

REPO = Path(__file__).resolve().parents[4]
DEMO = REPO / "fixtures" / "demo" / "support_desk.json"
BILLING = "The duplicate charge is refunded within five days."


@pytest.fixture(autouse=True)
def own_files(tmp_path, monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_FILES_DIR", str(tmp_path / "files"))


@pytest.fixture
def twenty_rows(tmp_path) -> dict[str, str]:
    """A 20-row dataset (even rows billing, odd rows technical), its script (the desks' replies and the
    judge's verdicts: rows 18 to 20 judged wrong) and a models config pricing the demo's model and the judge."""
    rows = [{"query": f"Why was I charged twice? ({i})" if i % 2 == 0 else f"The app crashes ({i})",
             "expected": "refunded" if i % 2 == 0 else "restart"} for i in range(20)]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    verdicts = ['{"score": 1, "reason": "the same facts"}'] * 17 + ['{"score": 0, "reason": "wrong"}'] * 3
    script = {"by_component": {"Categorize:Desk": ["billing" if i % 2 == 0 else "technical" for i in range(20)],
                               "LLM:Billing": [BILLING] * 10,
                               "LLM:Technical": ["Please restart the app."] * 10,
                               "judge": verdicts}}
    (tmp_path / "script.json").write_text(json.dumps(script))
    (tmp_path / "models.toml").write_text('[prices."gpt-4o-mini@OpenAI"]\ninput = 0.15\noutput = 0.60\n'
                                          '[prices."grader@OpenAI"]\ninput = 1.0\noutput = 2.0\n')
    return {"dataset": str(tmp_path / "rows.jsonl"), "script": str(tmp_path / "script.json"),
            "models": str(tmp_path / "models.toml")}


def test_a_judged_evaluation_of_twenty_rows_gives_the_documented_report(twenty_rows, tmp_path, capsys):
    out = tmp_path / "report.json"
    assert main(["eval", str(DEMO), "--dataset", twenty_rows["dataset"], "--llm-script", twenty_rows["script"],
                 "--models", twenty_rows["models"], "--metric", "judge", "--judge", "grader@OpenAI",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert "20/20" in printed.err                                   # the progress bar, as it ran
    assert f"{DEMO}: score 0.85 over 20 scored row(s) of 20 (17 passed); 0 run(s) not finished" in printed.out
    report = json.loads(out.read_text())
    assert report["format"] == "canvas2graph-eval" and report["metric"] == "judge" and report["judge"] == "grader@OpenAI"
    summary = report["summary"]
    assert (summary["rows"], summary["scored"], summary["score"], summary["passed"]) == (20, 20, 0.85, 17)
    assert set(summary["latency_ms"]) == {"p50", "p90", "p95", "p99", "max"}
    assert summary["latency_ms"]["p50"] <= summary["latency_ms"]["p99"] <= summary["latency_ms"]["max"]
    rows = report["rows"]
    assert [r["row"] for r in rows] == list(range(1, 21))
    first = rows[0]
    assert first["query"] == "Why was I charged twice? (0)" and first["inputs"] == {} and first["expected"] == "refunded"
    assert first["answer"] == f"Desk: (billing)\n{BILLING}" and first["score"] == 1.0 and first["reason"] == "the same facts"
    assert first["path"] == ["begin", "Categorize:Desk", "LLM:Billing", "Message:Answer"]
    assert [r["score"] for r in rows[17:]] == [0.0, 0.0, 0.0]
    # tokens: the scripted model counts words; every call is priced, so the cost is their sum
    assert summary["tokens"]["total_tokens"] == sum(r["tokens"]["total_tokens"] for r in rows) > 0
    expected_cost = sum(r["tokens"]["prompt_tokens"] * 0.15 + r["tokens"]["completion_tokens"] * 0.60 for r in rows) / 1e6 \
        + sum(r["judge_tokens"]["prompt_tokens"] * 1.0 + r["judge_tokens"]["completion_tokens"] * 2.0 for r in rows) / 1e6
    assert summary["cost"] == pytest.approx(expected_cost, abs=1e-6)


def test_a_model_without_a_price_leaves_the_cost_unknown(twenty_rows, capsys):
    assert main(["eval", str(DEMO), "--dataset", twenty_rows["dataset"], "--llm-script", twenty_rows["script"],
                 "--quiet"]) == 0
    assert "cost: not priced" in capsys.readouterr().out


def test_compare_runs_both_versions_on_the_same_rows_and_lists_the_rows_that_changed(twenty_rows, tmp_path, capsys):
    dsl = json.loads(DEMO.read_text())
    dsl["components"]["LLM:Technical"]["downstream"] = ["Message:Other"]      # technical questions get the fallback
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(dsl))
    out = tmp_path / "comparison.json"
    assert main(["eval", str(DEMO), "--compare", str(changed), "--dataset", twenty_rows["dataset"],
                 "--llm-script", twenty_rows["script"], "--metric", "contains", "--quiet", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    comparison = json.loads(out.read_text())
    assert comparison["format"] == "canvas2graph-eval-comparison"
    assert comparison["summary"] == {"rows": 20, "changed": 10, "better": 0, "worse": 10}
    assert [c["row"] for c in comparison["changed"]] == list(range(2, 21, 2))
    row = comparison["changed"][0]
    assert row["a"]["answer"] == "Desk: (technical)\nPlease restart the app." and row["a"]["score"] == 1.0
    assert row["b"]["score"] == 0.0 and row["b"]["path"][-1] == "Message:Other"
    assert "10 of 20 row(s) changed (0 better, 10 worse)" in printed
    assert "  row 2 (worse): 'The app crashes (1)'" in printed


def test_begin_inputs_come_from_their_columns_and_other_names_by_option(tmp_path, capsys):
    greeter = {"components": {
        "begin": cpn("Begin", {"mode": "task", "inputs": {"name": {"type": "line", "name": "Name", "optional": False}}},
                     ["Message:Hi"]),
        "Message:Hi": cpn("Message", {"content": ["{begin@name}"]})}}
    (tmp_path / "greeter.json").write_text(json.dumps(greeter))
    (tmp_path / "rows.csv").write_text('name,want\nAda,Ada\nBob,"Bob"\nEve,Eva\n')
    out = tmp_path / "report.html"
    assert main(["eval", str(tmp_path / "greeter.json"), "--dataset", str(tmp_path / "rows.csv"), "--metric", "exact",
                 "--expected-column", "want", "--concurrency", "3", "--quiet", "--out", str(out)]) == 0
    assert "score 0.6667 over 3 scored row(s) of 3 (2 passed)" in capsys.readouterr().out
    html = out.read_text()
    assert html.startswith("<!doctype html>") and "<pre>Ada</pre>" in html and "<pre>Eva</pre>" in html


def test_bad_options_and_datasets_are_refused_saying_why(twenty_rows, tmp_path, capsys):
    assert main(["eval", str(DEMO), "--dataset", twenty_rows["dataset"], "--metric", "judge"]) == 2
    assert "--metric judge needs the judge's model: --judge MODEL@FACTORY" in capsys.readouterr().err
    (tmp_path / "rows.txt").write_text("query\nhi\n")
    assert main(["eval", str(DEMO), "--dataset", str(tmp_path / "rows.txt")]) == 2
    assert "a dataset is a .csv or a .jsonl file" in capsys.readouterr().err
    (tmp_path / "bad.jsonl").write_text('{"query": "hi"}\n{"query": \n')
    assert main(["eval", str(DEMO), "--dataset", str(tmp_path / "bad.jsonl")]) == 2
    assert f"{tmp_path / 'bad.jsonl'}: line 2: not valid JSON" in capsys.readouterr().err
    (tmp_path / "noquery.csv").write_text("question,expected\nhi,hello\n")
    assert main(["eval", str(DEMO), "--dataset", str(tmp_path / "noquery.csv")]) == 2
    assert "line 2: no `query` column (the message; --query-column names another)" in capsys.readouterr().err


def test_two_stored_versions_of_one_agent_are_compared(twenty_rows, tmp_path, capsys):
    import asyncio

    from canvas2graph.server.backend.store import open_store

    changed = json.loads(DEMO.read_text())
    changed["components"]["LLM:Technical"]["downstream"] = ["Message:Other"]
    db = str(tmp_path / "server.db")

    async def store_two_versions():
        async with open_store(db) as store:
            agent = await store.create_agent("alice", "desk", json.loads(DEMO.read_text()))
            first = await store.save_version("alice", agent.id, agent.dsl, title="v1", diagnostics={}, created_by="t")
            second = await store.save_version("alice", agent.id, changed, title="v2", diagnostics={}, created_by="t")
            return agent.id, first.id, second.id
    agent_id, first, second = asyncio.run(store_two_versions())
    out = tmp_path / "comparison.json"
    assert main(["eval", f"agent:{agent_id}@{first}", "--compare", f"agent:{agent_id}@{second}", "--db", db,
                 "--dataset", twenty_rows["dataset"], "--llm-script", twenty_rows["script"], "--quiet",
                 "--out", str(out)]) == 0
    assert json.loads(out.read_text())["summary"] == {"rows": 20, "changed": 10, "better": 0, "worse": 10}
    assert "10 of 20 row(s) changed (0 better, 10 worse)" in capsys.readouterr().out
    assert main(["eval", f"agent:{agent_id}@nope", "--db", db, "--dataset", twenty_rows["dataset"]]) == 2
    assert f"agent {agent_id} has no version nope" in capsys.readouterr().err
