"""ExeSQL runs SQL on the real PostgreSQL and MariaDB of the test machine: rows come back as RAGFlow's
markdown tables and as JSON, `max_records` caps them, several statements run one after another, and
nothing can write: INSERT/UPDATE/DELETE are refused and every other statement runs in a read-only
transaction that is rolled back.

The servers are `$CANVAS2GRAPH_TEST_POSTGRES` (default postgres@127.0.0.1:5432/test) and
`$CANVAS2GRAPH_TEST_MARIADB` (default root@127.0.0.1:3306/test). When one is unreachable its tests
skip, saying why, except under CI=true, where they fail. Each test works on its own table.
"""
from __future__ import annotations

import os
import uuid
from urllib.parse import urlsplit

import pytest

from canvas2graph.compiler.canvas import diagnose
from canvas2graph.nodes.tool import ToolError
from canvas2graph.runtime.services.netguard import HostRefused
from tests.fake_dns import FakeDNS
from tests.conftest import cpn, dsl
from tests.nodes.helpers import build, context, errors, state
from tests.nodes.tools.support import agent_dsl, closed_port_url, finished, node_dsl, run_turn, tool_messages

POSTGRES = urlsplit(os.environ.get("CANVAS2GRAPH_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"))
MARIADB = urlsplit(os.environ.get("CANVAS2GRAPH_TEST_MARIADB", "mysql://root@127.0.0.1:3306/test"))
ORDERS = [(1, "Ada", "12.50", "2024-05-01", "first order"), (2, "Grace", "7.25", "2024-05-03", None),
          (3, "Linus", "100.00", "2024-06-10", "bulk")]


def unavailable(what: str, error: Exception) -> None:
    message = f"{what} is unreachable ({type(error).__name__}: {str(error).strip()[:200]})"
    if os.environ.get("CI") == "true":
        pytest.fail(message + " - CI must run the ExeSQL tests against it")
    pytest.skip(message)


class Database:
    """A table of orders in one server, and the params an ExeSQL needs to reach it."""

    def __init__(self, db_type: str, url, table: str):
        self.db_type = db_type
        self.table = table
        self.params = {"db_type": db_type, "host": url.hostname, "port": url.port, "username": url.username,
                       "password": url.password or "", "database": url.path.lstrip("/")}
        self.url = url

    def query(self, sql: str) -> list[tuple]:
        """Rows read over a connection of the test's own, to see what the tool could not change."""
        if self.db_type == "postgres":
            import psycopg
            with psycopg.connect(self.url.geturl(), autocommit=True) as conn:
                return [tuple(r) for r in conn.execute(sql).fetchall()]
        with mariadb_connection(self.url) as conn, conn.cursor() as cur:
            cur.execute(sql)
            return [tuple(r) for r in cur.fetchall()]

    def tables(self, name: str) -> int:
        if self.db_type == "postgres":
            return self.query(f"SELECT count(*) FROM information_schema.tables WHERE table_name = '{name}'")[0][0]
        return self.query(f"SELECT count(*) FROM information_schema.tables WHERE table_name = '{name}'")[0][0]


def mariadb_connection(url):
    import pymysql
    return pymysql.connect(host=url.hostname, port=url.port, user=url.username, password=url.password or "",
                           database=url.path.lstrip("/"), autocommit=True, connect_timeout=3)


@pytest.fixture
def postgres():
    import psycopg
    table = f"c2g_orders_{uuid.uuid4().hex[:10]}"
    try:
        conn = psycopg.connect(POSTGRES.geturl(), autocommit=True, connect_timeout=3)
    except psycopg.Error as e:
        unavailable(f"PostgreSQL at {POSTGRES.hostname}:{POSTGRES.port}", e)
    with conn:
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, customer text, amount numeric(10,2), "
                     f"placed date, note text)")
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO {table} VALUES (%s, %s, %s, %s, %s)", ORDERS)
        try:
            yield Database("postgres", POSTGRES, table)
        finally:
            conn.execute(f"DROP TABLE IF EXISTS {table}")


@pytest.fixture
def mariadb():
    import pymysql
    table = f"c2g_orders_{uuid.uuid4().hex[:10]}"
    try:
        conn = mariadb_connection(MARIADB)
    except pymysql.MySQLError as e:
        unavailable(f"MariaDB at {MARIADB.hostname}:{MARIADB.port}", e)
    with conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, customer varchar(50), amount decimal(10,2), "
                    f"placed date, note text)")
        cur.executemany(f"INSERT INTO {table} VALUES (%s, %s, %s, %s, %s)", ORDERS)
        try:
            yield Database("mariadb", MARIADB, table)
        finally:
            cur.execute(f"DROP TABLE IF EXISTS {table}")


@pytest.fixture(params=["postgres", "mariadb"])
def db(request, monkeypatch) -> Database:
    monkeypatch.setenv("CANVAS2GRAPH_EXESQL_ALLOW_PRIVATE", "1")        # the test servers are on 127.0.0.1
    return request.getfixturevalue(request.param)


async def run_sql(db: Database, sql: str, **params):
    node = build("ExeSQL:Q", "ExeSQL", {**db.params, "sql": "sys.query", **params})
    result = await node.run(state(sql), context())
    return result.outputs


TABLE = ("|   id | customer   |     amount |\n"
         "|-----:|:-----------|-----------:|\n"
         "|    1 | Ada        |  12.500000 |\n"
         "|    2 | Grace      |   7.250000 |\n"
         "|    3 | Linus      | 100.000000 |")


async def test_rows_come_back_as_a_markdown_table_and_as_json(db):
    out = await run_sql(db, f"SELECT id, customer, amount FROM {db.table} ORDER BY id")
    assert out["formalized_content"] == TABLE
    assert out["json"] == [[{"id": 1, "customer": "Ada", "amount": 12.5}, {"id": 2, "customer": "Grace", "amount": 7.25},
                            {"id": 3, "customer": "Linus", "amount": 100.0}]]


async def test_dates_and_nulls_are_text_and_empty_cells(db):
    out = await run_sql(db, f"SELECT placed, note FROM {db.table} WHERE id IN (1, 2) ORDER BY id")
    assert out["json"] == [[{"placed": "2024-05-01", "note": "first order"}, {"placed": "2024-05-03", "note": None}]]
    assert out["formalized_content"].splitlines()[-1] == "| 2024-05-03 |             |"


async def test_max_records_caps_the_rows_of_each_statement(db):
    out = await run_sql(db, f"SELECT id FROM {db.table} ORDER BY id; SELECT customer FROM {db.table} ORDER BY id",
                        max_records=2)
    assert out["json"] == [[{"id": 1}, {"id": 2}], [{"customer": "Ada"}, {"customer": "Grace"}]]


async def test_statements_run_one_after_another_and_a_failure_does_not_stop_the_rest(db):
    sql = (f"```sql\nSELECT count(*) AS n FROM {db.table};\nSELECT * FROM c2g_no_such_table;\n"
           f"SELECT id FROM {db.table} WHERE id > 100;\nSELECT max(id) AS top FROM {db.table} [ID:3]\n```")
    out = await run_sql(db, sql)
    count, missing, empty, top = out["json"]
    assert count == [{"n": 3}] and top == [{"top": 3}]
    assert missing["content"].startswith("The statement failed: SELECT * FROM c2g_no_such_table\n")
    assert "c2g_no_such_table" in missing["content"].splitlines()[1]
    assert empty == {"content": "The query returned no rows."}
    blocks = out["formalized_content"].split("\n\n")
    assert blocks[0] == "|   n |\n|----:|\n|   3 |" and blocks[-1] == "|   top |\n|------:|\n|     3 |"
    assert "The query returned no rows." in blocks


async def test_insert_update_and_delete_are_refused_before_they_reach_the_database(db):
    out = await run_sql(db, f"INSERT INTO {db.table} VALUES (9, 'Eve', 1, NULL, NULL); "
                            f"update {db.table} SET amount = 0; DELETE FROM {db.table}")
    refusal = {"content": "INSERT, UPDATE and DELETE statements are not allowed: this tool only reads data."}
    assert out["json"] == [refusal] * 3
    assert db.query(f"SELECT count(*) FROM {db.table} WHERE amount > 0") == [(3,)]


WRITES = {
    "postgres": ["CREATE TABLE {new} (id int)",
                 "WITH gone AS (DELETE FROM {table} RETURNING id) SELECT * FROM gone",
                 "SET TRANSACTION READ WRITE",
                 "COMMIT", "CREATE TABLE {new} (id int)",
                 "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE", "SET default_transaction_read_only = off",
                 "COMMIT", "DROP TABLE {table}", "TRUNCATE {table}"],
    "mariadb": ["CREATE TABLE {new} (id int)",
                "SET SESSION TRANSACTION READ WRITE", "CREATE TABLE {new} (id int)",
                "SET @@session.tx_read_only = 0", "COMMIT", "CREATE TABLE {new} (id int)",
                "REPLACE INTO {table} VALUES (1, 'Mallory', 0, NULL, NULL)",
                "DROP TABLE {table}", "TRUNCATE TABLE {table}"],
}


async def test_every_other_statement_runs_in_a_read_only_transaction(db):
    new = f"c2g_new_{uuid.uuid4().hex[:8]}"
    statements = [s.format(table=db.table, new=new) for s in WRITES[db.db_type]]
    out = await run_sql(db, ";\n".join(statements))
    failures = [o["content"] for o in out["json"] if isinstance(o, dict) and o["content"].startswith("The statement failed")]
    assert failures, out["json"]
    assert any("read-only" in f or "READ ONLY" in f for f in failures)
    assert db.tables(new) == 0
    assert db.query(f"SELECT id, customer FROM {db.table} ORDER BY id") == [(1, "Ada"), (2, "Grace"), (3, "Linus")]


async def test_an_unreachable_server_is_a_clear_error_without_the_password(monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_EXESQL_ALLOW_PRIVATE", "1")
    port = urlsplit(closed_port_url()).port
    for db_type in ("postgres", "mysql"):
        node = build("ExeSQL:Q", "ExeSQL", {"db_type": db_type, "host": "127.0.0.1", "port": port, "username": "reader",
                                            "password": "pa55-w0rd-xyz", "database": "shop", "sql": "sys.query"})
        with pytest.raises(ToolError) as caught:
            await node.run(state("SELECT 1"), context())
        message = str(caught.value)
        assert message.startswith(f"cannot connect to the {db_type} database 'shop' at 127.0.0.1:{port} as 'reader': ")
        assert "pa55-w0rd-xyz" not in message
        assert isinstance(caught.value, ConnectionError)          # worth retrying


async def test_a_refused_login_or_an_unknown_database_is_not_retried(db):
    params = {"password": "pa55-w0rd-xyz"} if db.db_type == "mariadb" else {"database": "c2g_no_such_database"}
    with pytest.raises(ToolError) as caught:
        await run_sql(db, "SELECT 1", **params)
    message = str(caught.value)
    assert message.startswith(f"cannot connect to the {db.db_type} database ")
    assert ("Access denied" in message) if db.db_type == "mariadb" else ("does not exist" in message)
    assert "pa55-w0rd-xyz" not in message and not isinstance(caught.value, ConnectionError)


async def test_empty_sql_is_an_error(db):
    with pytest.raises(ToolError, match="there is no SQL to run"):
        await run_sql(db, "  ")


@pytest.mark.parametrize("kind", ["postgres", "mariadb"])
async def test_loopback_hosts_are_refused_unless_allowed(kind, request):
    server = request.getfixturevalue(kind)
    node = build("ExeSQL:Q", "ExeSQL", {**server.params, "sql": "sys.query"})
    with pytest.raises(HostRefused, match="127.0.0.1 is a private, loopback or otherwise non-public address; "
                                          "set CANVAS2GRAPH_EXESQL_ALLOW_PRIVATE=1"):
        await node.run(state("SELECT 1 AS one"), context())
    ctx = context()
    ctx.extras["allow_private"] = {"ExeSQL"}                 # a run service may lift the guard instead
    result = await node.run(state("SELECT 1 AS one"), ctx)
    assert result.outputs["json"] == [[{"one": 1}]]


@pytest.mark.parametrize("kind", ["postgres", "mariadb"])
async def test_the_database_is_reached_at_the_address_the_guard_checked(kind, request, monkeypatch):
    """The host name is resolved once by the guard; the driver connects to that address (no second
    lookup a rebinding DNS could answer with an inside address)."""
    server = request.getfixturevalue(kind)
    dns = FakeDNS.install(monkeypatch)
    dns.names["db.example"] = ["127.0.0.1"]
    node = build("ExeSQL:Q", "ExeSQL", {**server.params, "host": "db.example", "sql": "sys.query"})
    result = await node.run(state("SELECT 1 AS one"), context())
    assert result.outputs["json"] == [[{"one": 1}]] and dns.lookups == ["db.example"]


async def test_as_a_node_the_sql_comes_from_the_canvas_and_the_table_feeds_downstream(db):
    params = {**db.params, "sql": f"SELECT id, customer, amount FROM {db.table} WHERE customer = '{{sys.query}}'"}
    events = await run_turn(node_dsl("ExeSQL:Q", "ExeSQL", params), "Grace")
    done = finished(events, "ExeSQL:Q")
    assert done["inputs"] == {"sql": f"SELECT id, customer, amount FROM {db.table} WHERE customer = 'Grace'"}
    assert done["outputs"]["json"] == [[{"id": 2, "customer": "Grace", "amount": 7.25}]]
    assert events[-1]["data"]["outputs"]["content"] == done["outputs"]["formalized_content"]
    assert done["outputs"]["formalized_content"].endswith("|    2 | Grace      | 7.250000 |")


async def test_as_agent_tool_the_model_reads_the_tables(db):
    tool = {"component_name": "ExeSQL", "name": "ExeSQL", "params": db.params}
    calls = [{"name": "execute_sql_0", "arguments": {"sql": f"SELECT id, customer, amount FROM {db.table} ORDER BY id"}},
             {"name": "execute_sql_0", "arguments": {"sql": f"DELETE FROM {db.table}"}}]
    await run_turn(agent_dsl(tool, cite=False), "Who ordered?", {"replies": [{"tool_calls": calls}], "auto_reply": "done"})
    table, refusal = tool_messages()
    assert table == TABLE
    assert refusal == "INSERT, UPDATE and DELETE statements are not allowed: this tool only reads data."
    assert db.query(f"SELECT count(*) FROM {db.table}") == [(3,)]


async def test_as_agent_tool_a_connection_failure_is_what_the_model_reads(monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_EXESQL_ALLOW_PRIVATE", "1")
    port = urlsplit(closed_port_url()).port
    tool = {"component_name": "ExeSQL", "name": "ExeSQL", "params": {
        "db_type": "postgres", "host": "127.0.0.1", "port": port, "username": "reader", "password": "pa55-w0rd-xyz",
        "database": "shop"}}
    call = {"name": "execute_sql_0", "arguments": {"sql": "SELECT 1"}}
    await run_turn(agent_dsl(tool, cite=False), "q", {"replies": [{"tool_calls": [call]}], "auto_reply": "done"})
    [text] = tool_messages()
    assert text.startswith(f"ExeSQL error: cannot connect to the postgres database 'shop' at 127.0.0.1:{port}")
    assert "pa55-w0rd-xyz" not in text


GOOD = {"db_type": "postgres", "host": "db.example", "port": 5432, "username": "reader", "password": "x",
        "database": "shop"}


@pytest.mark.parametrize("params, field", [
    ({"db_type": "oracle"}, "params.db_type"),
    ({"host": ""}, "params.host"),
    ({"username": " "}, "params.username"),
    ({"database": ""}, "params.database"),
    ({"port": 0}, "params.port"),
    ({"max_records": 0}, "params.max_records"),
    ({"database": "rag_flow", "host": "ragflow-mysql"}, "params.database"),
    ({"database": "rag_flow", "password": "infini_rag_flow"}, "params.database"),
])
def test_bad_params_are_compile_errors_naming_the_field(params, field):
    [error] = errors("ExeSQL", {**GOOD, **params})
    assert error.field == field and error.code == "invalid-param"


@pytest.mark.parametrize("db_type", ["mssql", "IBM DB2", "trino", "oceanbase"])
def test_other_database_types_are_reported_unsupported(db_type):
    [error] = errors("ExeSQL", {**GOOD, "db_type": db_type})
    assert (error.code, error.field) == ("unsupported", "params.db_type")
    _, diags = diagnose(agent_dsl({"component_name": "ExeSQL", "name": "SQL", "params": {**GOOD, "db_type": db_type}}))
    [error] = [d for d in diags if d.severity == "error"]
    assert (error.code, error.field) == ("unsupported", "params.tools.0.params.db_type")


def test_a_local_database_without_a_password_compiles():
    compiled, diags = diagnose(dsl(**{"ExeSQL:Q": cpn("ExeSQL", {**GOOD, "password": ""})}))
    assert compiled is not None, [str(d) for d in diags]
