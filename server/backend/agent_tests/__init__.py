"""Testing and evaluating agents: regression cases recorded from real sessions (`canvas2graph test`,
`canvas2graph record`, the pytest plugin) and datasets scored row by row (`canvas2graph eval`).

- `case`: the case folder format (version 1, docs/testing.md) and its checks;
- `matching`: exact, substring, regular-expression and JSON-subset comparisons;
- `observe`: what a session's turns did, read from its checkpoints (the step trace);
- `replay`: a case run again and compared; `record`: a stored session turned into a case;
- `datasets`, `metrics`, `evaluate`: rows read from CSV or JSONL, scored, reported and compared;
  `report_html` writes a report as a page, `eval_store` keeps the server's evaluations per tenant;
- `commands`, `evaluate_cli`, `junit`: the `test`, `record` and `eval` commands and the JUnit report;
- `pytest_plugin`: pytest collects case folders (entry point `pytest11`).
"""
