"""ExcelProcessor: read, merge, transform and write spreadsheets (SPEC 3.16).

`input_files` lists references to uploaded files (a Begin or UserFillUp file field, `sys.files`);
each resolves to file entries that the run's file store turns into bytes (`canvas2graph.runtime.services.files`).
Workbooks are read with pandas: `.csv` as one sheet, `.xlsx` with openpyxl and `.xls` with xlrd,
keeping the sheets `sheet_selection` names (`all`, `first` or a comma-separated list).

- `read`: `data` maps each file (and sheet, when there are several) to its rows; `summary` counts rows
  and columns; `markdown` shows the first 10 rows of each.
- `merge`: every sheet of every file stacked (`concat`) or joined on the `join_on` column (an outer
  join); `data` is `{"merged": rows}`, `markdown` its first 20 rows.
- `transform`: the value `transform_data` refers to ({sheet: rows}, rows, or one record) as tables.
- `output`: that value written as an `.xlsx` (a sheet per key) or `.csv` (the first sheet), stored as
  CodeExec's artifacts are and linked in `attachment` (`{doc_id, format, file_name, url}`).

Outputs follow RAGFlow's shapes: rows are lists of `{column: value}`; empty cells are null and dates
ISO strings (RAGFlow passes pandas' NaN and Timestamp objects on, which are not JSON).
"""
from __future__ import annotations

import io
import math
from typing import Any

from pydantic import Field, field_validator

from canvas2graph.compiler.dsl.refs import Ref, parse_ref
from canvas2graph.nodes.base import Node, NodeConfigError, Params, Result, settle_pending
from canvas2graph.nodes.registry import register
from canvas2graph.nodes.tools._web import one_of
from canvas2graph.runtime.services.files import FileStoreError, LoadedFile, load_files, store_for
from canvas2graph.runtime.graph.values import ReferenceError_, resolve

OPERATIONS = ("read", "merge", "transform", "output")
THOUGHTS = {"read": "Reading Excel files...", "merge": "Merging Excel data...", "transform": "Transforming data...",
            "output": "Generating Excel output..."}
XLSX_MIME = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


class ExcelProcessorParams(Params):
    input_files: list[str] = Field(default_factory=list)
    operation: str = "read"
    sheet_selection: str = "all"
    merge_strategy: str = "concat"
    join_on: str | None = ""
    transform_instructions: str | None = ""
    transform_data: str | None = ""
    output_format: str = "xlsx"
    output_filename: str = "output"
    outputs: Any = Field(default_factory=lambda: {"data": {"type": "object", "value": {}},
                                                  "summary": {"type": "str", "value": ""},
                                                  "markdown": {"type": "str", "value": ""}})

    _operation = one_of("operation", OPERATIONS)
    _format = one_of("output_format", ("xlsx", "csv"))

    @field_validator("input_files", mode="before")
    @classmethod
    def _input_files(cls, v: Any) -> Any:
        if v is None:
            return []
        return [v] if isinstance(v, str) else v

    @field_validator("operation", mode="before")
    @classmethod
    def _lower(cls, v: Any) -> Any:
        return v.lower() if isinstance(v, str) else v


def _outputs_of(params: ExcelProcessorParams) -> set[str]:
    return {"data", "summary", "markdown"} | ({"attachment"} if params.operation == "output" else set())


@register("ExcelProcessor", ExcelProcessorParams, outputs=_outputs_of)
class ExcelProcessor(Node):
    param_outputs = ("data", "summary", "markdown")
    # --- compile time -------------------------------------------------------------------
    def prepare(self) -> None:
        self.file_refs: list[tuple[str, Ref]] = []
        for i, source in enumerate(self.params.input_files):
            if not isinstance(source, str) or not source.strip():
                raise NodeConfigError(f"params.input_files.{i}", "each input file must be a variable reference "
                                      "such as '{begin@file}' or 'sys.files'")
            self.file_refs.append((source, parse_ref(source)))
        data = (self.params.transform_data or "").strip()
        self.data_ref: tuple[str, Ref] | None = (self.params.transform_data, parse_ref(data)) if data else None

    def references(self):
        found = [(f"params.input_files.{i}", ref) for i, (_, ref) in enumerate(self.file_refs)]
        if self.data_ref is not None:
            found.append(("params.transform_data", self.data_ref[1]))
        return found

    def thoughts(self, state) -> str:
        return THOUGHTS.get(self.params.operation, "Processing Excel...")

    # --- run time ------------------------------------------------------------------------
    async def run(self, state, ctx) -> Result:
        state, writes = await settle_pending(self, [r for _, r in self.references()], state, ctx)
        op = self.params.operation
        inputs: dict[str, Any] = {}
        if op in ("read", "merge"):
            tables = self._read_inputs(state, ctx, inputs)
            outputs = read_outputs(tables) if op == "read" else self._merge(tables)
        else:
            outputs = self._from_data(state, ctx, inputs)
        return Result(outputs=outputs, inputs=inputs, writes=writes)

    def _read_inputs(self, state, ctx, inputs: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """[(file name, {sheet: DataFrame})] for every file the input references name, in order."""
        extras = getattr(ctx, "extras", None) or {}
        store, tenant = store_for(extras), extras.get("tenant")
        found = []
        for source, ref in self.file_refs:
            value = _value(state, ref)
            inputs[source] = str(value)[:200] if value else ""
            if value is None:
                continue
            try:
                files = load_files(value, store, tenant)
            except FileStoreError as e:
                raise FileStoreError(f"{source}: {e}") from None
            found += [(f.name, read_workbook(f, self.params.sheet_selection)) for f in files]
        return found

    def _merge(self, tables) -> dict[str, Any]:
        import pandas as pd
        frames = [df for _, sheets in tables for df in sheets.values()]
        if not frames:
            return {"data": {}, "summary": "No data to merge"}
        join_on = (self.params.join_on or "").strip()
        if self.params.merge_strategy == "join" and join_on:
            for name, sheets in tables:
                for sheet, df in sheets.items():
                    if join_on not in df.columns:
                        raise ValueError(f"cannot join on {join_on!r}: sheet {sheet} of {name} has no such column "
                                         f"(its columns: {', '.join(map(str, df.columns))})")
            merged = frames[0]
            for df in frames[1:]:
                merged = merged.merge(df, on=join_on, how="outer")
        else:
            merged = pd.concat(frames, ignore_index=True)
        return {"data": {"merged": records(merged)},
                "summary": f"Merged {len(frames)} sources into {len(merged)} rows, {len(merged.columns)} columns",
                "markdown": merged.head(20).to_markdown(index=False)}

    def _from_data(self, state, ctx, inputs: dict[str, Any]) -> dict[str, Any]:
        op = self.params.operation
        if self.data_ref is None:
            return {"summary": "No transform data reference provided" if op == "transform" else "No data reference for output"}
        source, ref = self.data_ref
        data = _value(state, ref)
        inputs[source] = str(data)[:300] if data else ""
        if data is None:
            return {"summary": "Transform data is empty" if op == "transform" else "No data to output"}
        return transform(data) if op == "transform" else self._output(data, ctx)

    def _output(self, data: Any, ctx) -> dict[str, Any]:
        import pandas as pd
        from canvas2graph.runtime.services.sandbox import CodePolicy, store_document
        if isinstance(data, dict) and data and all(isinstance(v, list) for v in data.values()):
            frames = {str(k): pd.DataFrame(v) for k, v in data.items()}
        elif isinstance(data, dict):
            frames = {"Sheet1": pd.DataFrame([data])}
        elif isinstance(data, list):
            frames = {"Sheet1": pd.DataFrame(data)}
        else:
            return {"summary": "Invalid data format for Excel output"}
        fmt = self.params.output_format
        name = f"{self.params.output_filename}.{fmt}"
        if fmt == "csv":             # one table per CSV: the first sheet
            content, mime = next(iter(frames.values())).to_csv(index=False).encode("utf-8"), "text/csv"
        else:
            buffer = io.BytesIO()
            with pd.ExcelWriter(buffer, engine="openpyxl") as writer:
                for sheet, df in frames.items():
                    df.to_excel(writer, sheet_name=sheet[:31].replace("/", "_").replace("\\", "_"), index=False)
            content, mime = buffer.getvalue(), XLSX_MIME
        extras = getattr(ctx, "extras", None) or {}
        stored = store_document(name, content, mime, CodePolicy.resolve(extras.get("code")), extras.get("tenant"))
        doc_id = stored["url"].rstrip("/").rsplit("/", 1)[-1].split(".")[0]
        total = sum(len(df) for df in frames.values())
        return {"attachment": {"doc_id": doc_id, "format": fmt, "file_name": name, "url": stored["url"]},
                "summary": f"Generated {name} with {len(frames)} sheet(s), {total} total rows",
                "data": {k: records(v) for k, v in frames.items()}}


def _value(state, ref: Ref) -> Any:
    try:
        return resolve(state, ref)
    except ReferenceError_:
        return None


def read_workbook(file: LoadedFile, sheet_selection: str) -> dict[str, Any]:
    """{sheet name: DataFrame} of one uploaded file, keeping the selected sheets."""
    import pandas as pd
    name = file.name.lower()
    try:
        if name.endswith(".csv") or file.mime_type == "text/csv":
            return {"Sheet1": pd.read_csv(io.BytesIO(file.data))}
        engine = "xlrd" if name.endswith(".xls") else "openpyxl"
        with pd.ExcelFile(io.BytesIO(file.data), engine=engine) as book:
            sheets = list(book.sheet_names)
            if sheet_selection == "all":
                chosen = sheets
            elif sheet_selection == "first":
                chosen = sheets[:1]
            else:
                chosen = [s for s in (part.strip() for part in sheet_selection.split(",")) if s in sheets]
            return {sheet: pd.read_excel(book, sheet_name=sheet) for sheet in chosen}
    except Exception as e:      # pandas, openpyxl and xlrd raise many kinds for a file they cannot read
        raise ValueError(f"cannot read {file.name} as a spreadsheet (.xlsx, .xls or .csv): {e}") from None


def read_outputs(tables: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    summaries, parts = [], []
    for filename, sheets in tables:
        for sheet, df in sheets.items():
            key = f"{filename}_{sheet}" if len(sheets) > 1 else filename
            data[key] = records(df)
            columns = [str(c) for c in df.columns]
            more = "..." if len(columns) > 5 else ""
            summaries.append(f"**{key}**: {len(df)} rows, {len(columns)} columns ({', '.join(columns[:5])}{more})")
            parts.append(f"### {key}\n\n{df.head(10).to_markdown(index=False)}\n")
    return {"data": data, "summary": "\n".join(summaries) if summaries else "No Excel files found",
            "markdown": "\n\n".join(parts) if parts else "No data"}


def transform(data: Any) -> dict[str, Any]:
    import pandas as pd
    if isinstance(data, dict):
        if all(isinstance(v, list) for v in data.values()):
            markdown = "\n\n".join(f"### {k}\n\n{pd.DataFrame(v).to_markdown(index=False)}" for k, v in data.items())
            out = {"data": data, "markdown": markdown}
        else:
            df = pd.DataFrame([data])
            out = {"data": records(df), "markdown": df.to_markdown(index=False)}
    elif isinstance(data, list):
        df = pd.DataFrame(data)
        out = {"data": records(df), "markdown": df.to_markdown(index=False)}
    else:
        out = {"data": {"raw": str(data)}, "markdown": str(data)}
    out["summary"] = "Transformed data ready for processing"
    return out


def records(df) -> list[dict[str, Any]]:
    """A table's rows as JSON-ready objects: NaN and NaT become null, timestamps ISO strings."""
    return [{str(k): _plain(v) for k, v in row.items()} for row in df.to_dict(orient="records")]


def _plain(value: Any) -> Any:
    import numpy as np
    import pandas as pd
    if value is None or value is pd.NaT:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    if isinstance(value, np.generic):
        return _plain(value.item())
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value
