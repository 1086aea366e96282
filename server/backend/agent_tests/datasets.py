"""Evaluation datasets: rows read from a CSV file (a header line) or a JSONL file (an object per line).

A row's message is its `query` column, Begin's inputs come from the columns named after them, and the
expected answer from `expected` (other column names by option). A JSONL row may also hold an `inputs`
object. Every problem names the file and the line.
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Row", "DatasetError", "read_dataset", "parse_dataset"]

MAX_ROWS = 100_000


class DatasetError(ValueError):
    """A dataset that cannot be read: the message names the file, the line and the column."""


@dataclass
class Row:
    index: int                          # 1 for the first row
    query: str
    inputs: dict[str, Any] = field(default_factory=dict)
    expected: Any = None
    fields: dict[str, Any] = field(default_factory=dict)     # every column, as read


def _csv_records(text: str, name: str) -> list[tuple[int, dict]]:
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames:
        raise DatasetError(f"{name}: the CSV file has no header line")
    records = []
    for record in reader:
        if None in record:
            raise DatasetError(f"{name}: line {reader.line_num}: more values than the header has columns")
        records.append((reader.line_num, record))
    return records


def _jsonl_records(text: str, name: str) -> list[tuple[int, dict]]:
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as e:
            raise DatasetError(f"{name}: line {number}: not valid JSON: {e}")
        if not isinstance(record, dict):
            raise DatasetError(f"{name}: line {number}: a row must be a JSON object of column: value")
        records.append((number, record))
    return records


def parse_dataset(data: bytes, name: str, *, query_column: str = "query", expected_column: str = "expected",
                  input_names: list[str] | tuple = ()) -> list[Row]:
    """The rows of a dataset file's content; `name` (ending .csv or .jsonl) says which format."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DatasetError(f"{name}: not UTF-8 text ({e.reason} at byte {e.start})")
    lower = name.lower()
    if lower.endswith(".csv"):
        records = _csv_records(text, name)
    elif lower.endswith((".jsonl", ".ndjson")):
        records = _jsonl_records(text, name)
    else:
        raise DatasetError(f"{name}: a dataset is a .csv or a .jsonl file")
    if not records:
        raise DatasetError(f"{name}: the dataset has no rows")
    if len(records) > MAX_ROWS:
        raise DatasetError(f"{name}: {len(records):,} rows, more than the {MAX_ROWS:,} an evaluation takes")
    rows = []
    for index, (line, record) in enumerate(records, 1):
        if query_column not in record and not input_names:
            raise DatasetError(f"{name}: line {line}: no `{query_column}` column (the message; "
                               "--query-column names another)")
        inputs = dict(record["inputs"]) if isinstance(record.get("inputs"), dict) else {}
        inputs.update({key: record[key] for key in input_names if key in record and record[key] not in (None, "")})
        query = record.get(query_column)
        rows.append(Row(index=index, query="" if query is None else str(query), inputs=inputs,
                        expected=record.get(expected_column), fields=record))
    return rows


def read_dataset(path: str, **options: Any) -> list[Row]:
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise DatasetError(f"cannot read {path}: {e.strerror}")
    return parse_dataset(data, path, **options)
