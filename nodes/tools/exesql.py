"""ExeSQL: run SQL on a MySQL, MariaDB or PostgreSQL database and return the rows (SPEC 3.17).

As RAGFlow does, the SQL is split on `;` into statements (a `;` inside a string literal splits it
too), code fences (with their language word: ```sql) and `[ID:n]` citation marks are removed, each statement's first `max_records` rows
become a markdown table in `formalized_content` (what a model reads) and a list of row objects in
`json`, and a statement that fails or returns nothing becomes a message in both while the others
still run. INSERT, UPDATE and DELETE are refused before they reach the database, as in RAGFlow.

Beyond RAGFlow, every statement runs inside a read-only transaction that is rolled back at the end,
so no statement can change data, whatever its first word:
- PostgreSQL: `BEGIN READ ONLY`, then a first query so the transaction can no longer be switched to
  read-write; after a statement ends the transaction (COMMIT, an error) a new one is begun.
- MySQL/MariaDB: `SET SESSION TRANSACTION READ ONLY` and `START TRANSACTION READ ONLY` before every
  statement. The session setting matters: DDL commits the open transaction implicitly and would
  otherwise run outside it, and a statement could turn the session's setting off for the next one.
A read-only transaction still lets a privileged role call server functions that act outside the
database (COPY ... TO PROGRAM, SELECT ... INTO OUTFILE): give the tool a role that may only read.

The database host goes through the host guard (`canvas2graph.runtime.services.netguard`): private and loopback
addresses need `CANVAS2GRAPH_EXESQL_ALLOW_PRIVATE=1` (or `ctx.extras["allow_private"]`).
db_types RAGFlow also lists (mssql, IBM DB2, trino, oceanbase) are reported as unsupported at
compile time.
"""
from __future__ import annotations

import asyncio
import datetime
import json
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pydantic import Field, ValidationInfo, field_validator
from tabulate import tabulate

from canvas2graph.types import NodeConfigError
from canvas2graph.nodes.base import Params
from canvas2graph.nodes.registry import register
from canvas2graph.nodes.tool import Tool, ToolArg, ToolError, ToolOutput
from canvas2graph.nodes.tools._web import ServiceUnavailable, masked
from canvas2graph.runtime.services.netguard import HostGuard

KNOWN_DB_TYPES = ("mysql", "postgres", "mariadb", "mssql", "IBM DB2", "trino", "oceanbase")
SUPPORTED_DB_TYPES = ("mysql", "mariadb", "postgres")
CONNECT_TIMEOUT_S = 10
WRITES = re.compile(r"^(insert|update|delete)\b", re.IGNORECASE)
CITATION = re.compile(r"\[ID:[0-9]+\]")
FENCE = re.compile(r"```(?:[A-Za-z]+(?=\s))?")      # a code fence and its language word (```sql)

REFUSED_WRITE = "INSERT, UPDATE and DELETE statements are not allowed: this tool only reads data."
NO_ROWS = "The query returned no rows."


class ExeSQLParams(Params):
    db_type: str = "mysql"
    host: str = ""
    port: int = Field(3306, gt=0)
    username: str = ""
    # RAGFlow requires a password; a local database may well have none, so an empty one is allowed
    password: str | None = ""
    database: str = ""          # after host and password: its check reads them
    max_records: int = Field(1024, gt=0)

    @field_validator("db_type")
    @classmethod
    def _db_type(cls, v: str) -> str:
        if v not in KNOWN_DB_TYPES:
            raise ValueError(f"db_type must be one of {', '.join(KNOWN_DB_TYPES)}, not {v!r}")
        return v

    @field_validator("host", "username")
    @classmethod
    def _required(cls, v: str, info: ValidationInfo) -> str:
        if not v.strip():
            raise ValueError(f"{info.field_name} must not be empty")
        return v.strip()

    @field_validator("database")
    @classmethod
    def _database(cls, v: str, info: ValidationInfo) -> str:
        if not v.strip():
            raise ValueError("database must not be empty")
        # RAGFlow's own database, recognised as RAGFlow recognises it (its host or its default password)
        if v == "rag_flow" and (info.data.get("host") == "ragflow-mysql"
                                or info.data.get("password") == "infini_rag_flow"):
            raise ValueError("for security reasons, RAGFlow's internal database rag_flow cannot be queried")
        return v.strip()


@dataclass
class Rows:
    columns: list[str]
    rows: list[tuple]


Outcome = Rows | str            # a statement's rows, or the message that stands for them


@register("ExeSQL", ExeSQLParams, outputs=lambda p: {"formalized_content", "json"})
class ExeSQL(Tool):
    function_name = "execute_sql"
    tool_description = ("Run SQL on the configured database and get the rows back as markdown tables. "
                        "Only reading is allowed: statements that change data are refused.")
    args = {"sql": ToolArg("string", "The SQL to run. Separate several statements with semicolons.",
                           required=True, default="{sys.query}")}
    thoughts_text = "Running the SQL query and waiting for the rows."

    def prepare_tool(self) -> None:
        if self.params.db_type not in SUPPORTED_DB_TYPES:
            raise NodeConfigError("params.db_type", f"db_type {self.params.db_type!r} is not supported by this "
                                  f"version of canvas2graph; use one of {', '.join(SUPPORTED_DB_TYPES)}",
                                  code="unsupported")

    async def execute(self, args: dict, ctx) -> ToolOutput:
        sql = args.get("sql")
        sql = "" if sql is None else str(sql)
        if not sql.strip():
            raise ToolError("there is no SQL to run: the sql argument is empty")
        statements = split_statements(sql)
        p = self.params
        guard = HostGuard.of("ExeSQL", ctx)
        address = None if guard.allow_private else await guard.address(p.host, p.port)
        if p.db_type == "postgres":
            outcomes = await postgres_outcomes(p, address, statements)
        else:
            outcomes = await asyncio.to_thread(mysql_outcomes, p, address, statements)
        return ToolOutput({"formalized_content": "\n\n".join(markdown(o) for o in outcomes),
                           "json": [records(o) for o in outcomes]})


def split_statements(sql: str) -> list[str]:
    statements = []
    for piece in sql.split(";"):
        piece = CITATION.sub("", FENCE.sub("", piece)).strip()
        if piece:
            statements.append(piece)
    return statements


def refused(statement: str) -> str | None:
    return REFUSED_WRITE if WRITES.match(statement) else None


def failed(statement: str, error: Exception, password: str) -> str:
    return f"The statement failed: {statement}\n{masked(str(error).strip(), [password])}"


def connection_error(p: ExeSQLParams, error: Exception, retryable: bool) -> ToolError:
    """What went wrong, with where and as whom, never the password."""
    reason = masked(" ".join(str(error).split()) or type(error).__name__, [p.password or ""])
    message = (f"cannot connect to the {p.db_type} database {p.database!r} at {p.host}:{p.port} "
               f"as {p.username!r}: {reason}")
    return ServiceUnavailable(message) if retryable else ToolError(message)


# --- PostgreSQL (psycopg 3, async) ---------------------------------------------------------------

async def postgres_outcomes(p: ExeSQLParams, address: str | None, statements: list[str]) -> list[Outcome]:
    import psycopg
    from psycopg.pq import TransactionStatus

    kwargs: dict[str, Any] = {"host": p.host, "port": p.port, "dbname": p.database, "user": p.username,
                              "password": p.password or None, "connect_timeout": CONNECT_TIMEOUT_S,
                              "autocommit": True, "options": "-c default_transaction_read_only=on"}
    if address is not None:
        kwargs["hostaddr"] = address        # the address the guard checked; host stays for TLS and auth
    try:
        conn = await psycopg.AsyncConnection.connect(**kwargs)
    except psycopg.Error as e:
        text = str(e)
        final = any(s in text for s in ("authentication failed", "does not exist", "pg_hba.conf"))
        raise connection_error(p, e, retryable=not final) from None
    outcomes: list[Outcome] = []
    try:
        async with conn.cursor() as cur:
            for statement in statements:
                if (message := refused(statement)) is not None:
                    outcomes.append(message)
                    continue
                if conn.info.transaction_status == TransactionStatus.IDLE:
                    await cur.execute("BEGIN READ ONLY")
                    # a first query takes the transaction's snapshot; after it, SET TRANSACTION
                    # READ WRITE is refused
                    await cur.execute("SELECT 1")
                try:
                    await cur.execute(statement)
                except psycopg.Error as e:
                    await cur.execute("ROLLBACK")
                    outcomes.append(failed(statement, e, p.password or ""))
                    continue
                if cur.description is None:
                    outcomes.append(NO_ROWS)
                    continue
                rows = await cur.fetchmany(p.max_records)
                outcomes.append(Rows([d.name for d in cur.description], list(rows)) if rows else NO_ROWS)
            if conn.info.transaction_status != TransactionStatus.IDLE:
                await cur.execute("ROLLBACK")
    finally:
        await conn.close()
    return outcomes


# --- MySQL and MariaDB (PyMySQL, in a worker thread) ----------------------------------------------

MYSQL_FINAL_ERRORS = {1044, 1045, 1049, 1698}       # access denied, unknown database: retrying will not help


def mysql_outcomes(p: ExeSQLParams, address: str | None, statements: list[str]) -> list[Outcome]:
    import pymysql
    from pymysql.constants import SERVER_STATUS

    try:
        conn = pymysql.connect(host=address or p.host, port=p.port, user=p.username, password=p.password or "",
                               database=p.database, connect_timeout=CONNECT_TIMEOUT_S, charset="utf8mb4",
                               autocommit=False)
    except pymysql.MySQLError as e:
        code = e.args[0] if e.args and isinstance(e.args[0], int) else None
        raise connection_error(p, e, retryable=code not in MYSQL_FINAL_ERRORS) from None
    outcomes: list[Outcome] = []
    try:
        with conn.cursor() as cur:
            for statement in statements:
                if (message := refused(statement)) is not None:
                    outcomes.append(message)
                    continue
                # again before every statement: the previous one may have turned the session's
                # setting off or ended the transaction
                cur.execute("SET SESSION TRANSACTION READ ONLY")
                if not conn.server_status & SERVER_STATUS.SERVER_STATUS_IN_TRANS:
                    cur.execute("START TRANSACTION READ ONLY")
                try:
                    cur.execute(statement)
                except pymysql.MySQLError as e:
                    conn.rollback()
                    outcomes.append(failed(statement, e, p.password or ""))
                    continue
                if cur.description is None:
                    outcomes.append(NO_ROWS)
                    continue
                rows = cur.fetchmany(p.max_records)
                outcomes.append(Rows([d[0] for d in cur.description], list(rows)) if rows else NO_ROWS)
        conn.rollback()
    finally:
        conn.close()
    return outcomes


# --- outputs ---------------------------------------------------------------------------------------

def plain(value: Any) -> Any:
    """A database value as JSON: decimals as floats (NaN and infinities as null), dates and other
    objects as their text, bytes decoded."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, (float, Decimal)):
        number = float(value)
        return None if math.isnan(number) or math.isinf(number) else number
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (datetime.date, datetime.time)):
        return str(value)           # 2024-05-01, 2024-05-01 09:30:00+00:00, 09:30:00
    return str(value)


def records(outcome: Outcome) -> Any:
    if isinstance(outcome, str):
        return {"content": outcome}
    return [dict(zip(outcome.columns, (plain(v) for v in row))) for row in outcome.rows]


def cell(value: Any) -> Any:
    value = plain(value)
    return json.dumps(value, ensure_ascii=False) if isinstance(value, (dict, list)) else value


def markdown(outcome: Outcome) -> str:
    """RAGFlow's table: a pipe table, numbers right-aligned, floats with six decimals, nulls empty."""
    if isinstance(outcome, str):
        return outcome
    rows = [[cell(v) for v in row] for row in outcome.rows]
    return tabulate(rows, headers=outcome.columns, tablefmt="pipe", floatfmt=".6f")
