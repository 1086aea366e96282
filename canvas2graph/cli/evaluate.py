"""`canvas2graph eval DSL --dataset FILE ...` (registered in canvas2graph/cli/main.py): run, score, print, write."""
from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from canvas2graph.types import UsageError

__all__ = ["cmd_eval"]


def _models(args):
    """(model factory, shared script or None) from `run`'s model options."""
    from canvas2graph.runtime.services.models import ModelFactory
    from canvas2graph.runtime.services.scripted import Script
    script = Script.load(args.llm_script) if args.llm_script else None
    return ModelFactory(script=script, config_path=args.models), script


AGENT_PREFIX = "agent:"


async def _stored(spec: str, db: str):
    """`agent:ID` (the agent's current DSL) or `agent:ID@VERSION` (a saved version), from the server's database."""
    from canvas2graph.server.backend.store import open_store
    agent_id, _, version_id = spec[len(AGENT_PREFIX):].partition("@")
    async with open_store(db) as store:
        agent = await store.find_agent(agent_id)
        if agent is None:
            raise UsageError(f"{db} has no agent {agent_id}")
        if not version_id:
            return agent.dsl
        version = await store.get_version(agent.tenant, agent_id, version_id)
        if version is None:
            raise UsageError(f"agent {agent_id} has no version {version_id} (the server lists its versions at "
                             f"GET /api/v1/agents/{agent_id}/versions)")
        return version.dsl


def _compiled(path: str, default_llm: str | None, db: str | None = None):
    """A DSL file, or a stored agent (`agent:ID[@VERSION]`, read from --db)."""
    from canvas2graph.compiler.canvas import compile_dsl
    from canvas2graph.cli.compile import read_source
    source = asyncio.run(_stored(path, db)) if path.startswith(AGENT_PREFIX) else read_source(path)
    return compile_dsl(source, default_llm=default_llm)


def _begin_inputs(compiled) -> list[str]:
    begin = compiled.plan.nodes.get("begin")
    inputs = getattr(getattr(begin, "params", None), "inputs", None)
    return list(inputs) if isinstance(inputs, dict) else []


def _progress(label: str, quiet: bool):
    if quiet:
        return None, None
    from tqdm import tqdm
    bar = tqdm(total=0, desc=label, unit="row", file=sys.stderr, leave=True)

    def update(done: int, total: int, row: dict) -> None:
        bar.total = total
        bar.update(1)
        bar.set_postfix_str(f"row {row['row']}: score {row['score']}")
    return update, bar


async def _one(path: str, compiled, rows, args, setup):
    from canvas2graph.server.backend.agent_tests.evaluate import evaluate
    from canvas2graph.runtime.services.environment import RunEnvironment, RunSettings
    factory, script = _models(args)
    environment = RunEnvironment(RunSettings(db=args.db))
    update, bar = _progress(Path(path).name, args.quiet)
    try:
        return await evaluate(compiled, rows, setup, factory=factory, script=script,
                              services=environment.services(compiled.plan.dsl.components), progress=update)
    finally:
        if bar is not None:
            bar.close()
        await environment.aclose()


def _print_report(report: dict) -> None:
    s = report["summary"]
    latency = s["latency_ms"]
    print(f"{report['dsl']}: score {s['score']} over {s['scored']} scored row(s) of {s['rows']} ({s['passed']} passed); "
          f"{s['failed_runs']} run(s) not finished")
    print(f"  tokens {s['tokens']['total_tokens']} (prompt {s['tokens']['prompt_tokens']}, completion "
          f"{s['tokens']['completion_tokens']})" + (f", judge {s['judge_tokens']['total_tokens']}" if "judge_tokens" in s else "")
          + (f"; cost ${s['cost']:.6f}" if s["cost"] is not None else "; cost: not priced"))
    if latency:
        print(f"  latency ms p50 {latency['p50']:.1f}  p90 {latency['p90']:.1f}  p95 {latency['p95']:.1f}  "
              f"p99 {latency['p99']:.1f}  max {latency['max']:.1f}")


def _print_comparison(comparison: dict) -> None:
    _print_report(comparison["reports"]["a"])
    _print_report(comparison["reports"]["b"])
    s = comparison["summary"]
    print(f"{s['changed']} of {s['rows']} row(s) changed ({s['better']} better, {s['worse']} worse)")
    for c in comparison["changed"]:
        print(f"  row {c['row']} ({c['change']}): {c['query']!r}")
        print(f"    A [{c['a']['score']}] {c['a']['answer']!r}")
        print(f"    B [{c['b']['score']}] {c['b']['answer']!r}")


def cmd_eval(args) -> int:
    from canvas2graph.server.backend.agent_tests.datasets import DatasetError, read_dataset
    from canvas2graph.server.backend.agent_tests.evaluate import EvalSetup, PriceError, compare_reports, read_prices
    if args.metric == "judge" and not args.judge:
        raise UsageError("--metric judge needs the judge's model: --judge MODEL@FACTORY")
    if args.concurrency < 1:
        raise UsageError("--concurrency must be 1 or more")
    if args.out and not args.out.endswith((".json", ".html")):
        raise UsageError("--out writes report.json or report.html: end the file name with .json or .html")
    compiled = _compiled(args.file, args.default_llm, args.db)   # a DSL that does not compile fails before any row runs
    try:
        rows = read_dataset(args.dataset, query_column=args.query_column, expected_column=args.expected_column,
                            input_names=_begin_inputs(compiled))
        prices = read_prices(args.models)
    except (DatasetError, PriceError) as e:
        raise UsageError(str(e))
    setup = EvalSetup(metric=args.metric, judge=args.judge, concurrency=args.concurrency, prices=prices, label=args.file)
    other_compiled = None
    if args.compare:
        from canvas2graph.types import CompileError
        try:
            other_compiled = _compiled(args.compare, args.default_llm, args.db)
        except CompileError as e:       # the usual report names the first DSL: this one is the second
            raise UsageError(f"{args.compare} does not compile: " + "; ".join(str(d) for d in e.diagnostics))
    report = asyncio.run(_one(args.file, compiled, rows, args, setup))
    if args.compare:
        other = asyncio.run(_one(args.compare, other_compiled, rows, args,
                                 EvalSetup(**{**setup.__dict__, "label": args.compare})))
        report = compare_reports(report, other)
        _print_comparison(report)
    else:
        _print_report(report)
    if args.out:
        from canvas2graph.server.backend.agent_tests.report_html import to_html
        text = to_html(report) if args.out.endswith(".html") else json.dumps(report, ensure_ascii=False, indent=2) + "\n"
        try:
            Path(args.out).write_text(text, encoding="utf-8")
        except OSError as e:
            raise UsageError(f"cannot write {args.out}: {e.strerror}")
    return 0
