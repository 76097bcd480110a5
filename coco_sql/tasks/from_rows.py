"""Tasks from warehouse rows: `coco_task(name, source, options)` turns a table or query into a task.

The rows are materialised when the task is registered (the store's `tasks` and `task_rows` tables) and the splits
are fixed by the stored split seed, so a run stays reproducible when the source table grows later. A registered
task is loaded through the same loader as a pack on disk: its options are written as a task.toml beside the rows
(in a temporary folder), so every check a pack gets, a table gets too; errors name the option, not the file.

The name is an identifier (`options.TASK_NAME`), checked before anything is written anywhere. Options (a JSON
object; unknown keys are errors) are `options.TASK_OPTIONS`, each checked for type and range first:

    label              required: the label column
    seed_program       required: the SQL program to start from (over the relation `input`)
    input_columns      the input columns (default: every column but the id and the label)
    id_column          default "id" (ids are read as strings and must be unique)
    output             the program's output column (default: the label column's name)
    output_type        INTEGER | DOUBLE | VARCHAR | BOOLEAN | VARCHAR[] (default: from the label column's type)
    scorer             exact (default) | numeric | multilabel_f1 | token_match | bound_ratio
    allowed_functions  extra functions, e.g. ["AI_EMBED"]; the AI functions the seed calls are always enabled
    dialect            snowflake (default) | duckdb: the dialect programs are written in
    test_source        the held-out test rows: a table or one SELECT query (checked like the source)
    train_fraction     0.5 in (0, 1);  test_fraction 0.2 in [0, 1) (0 with test_source);  split_seed 0
    timeout_seconds    10.0 in (0, 3600], against a warm evaluation; description "rows of <source>"

`CALL coco_help('coco_task')` prints that table (types, ranges, defaults, examples), and so does the README.

Why the seed's AI functions are enabled by the seed itself (issue 26): a seed that calls AI_CLASSIFY was rejected
with "this task does not enable this AI function" until the user found `allowed_functions`; the seed is the
user's own statement of what the task may call. What the search may add on top stays the user's choice, in
`allowed_functions`, with one default (issue 38): a seed that calls AI_CLASSIFY, with no `allowed_functions`
given, also enables AI_EMBED and AI_SIMILARITY. Without them the learned heads, the proxy and the cascades are
outside the search space, and the cheapest program within one standard error of the best was "every training
row as a few-shot example" at 188-210 times the seed's tokens per row; an embedding costs its input's tokens,
less than the call it replaces, and every evaluation counts it in the deploy cost. A list given without
AI_EMBED keeps them out, as written.

Why `test_source`: a warehouse user holds a test set as a table of its own; without it the only held-out rows
were `test_fraction` of the source, and `test_fraction = 0` failed with a message about a data.test file.
The test rows are stored with the task's rows (positions after the source's) and never reach the search.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from coco_sql.errors import TaskError
from coco_sql.options import AIFO_TASK_OPTIONS, TASK_OPTIONS, as_object, check_task_name
from coco_sql.plugin_loader import DEPLOY_DIALECT
from coco_sql.plugins import kind, kind_names
from coco_sql.sqlkit.calls import ai_functions_called
from coco_sql.tasks.loader import TaskPack
from coco_sql.tasks.lookup import load_task

if TYPE_CHECKING:
    from coco_sql.languages.base import TaskRegistrar, TaskSpec

_CONTRACT_OF = {"BOOLEAN": "BOOLEAN", "VARCHAR": "VARCHAR", "DOUBLE": "DOUBLE", "FLOAT": "DOUBLE"}
_INTEGERS = (
    "TINYINT",
    "SMALLINT",
    "INTEGER",
    "BIGINT",
    "HUGEINT",
    "UTINYINT",
    "USMALLINT",
    "UINTEGER",
    "UBIGINT",
)
# task.toml keys -> the option a user wrote, for error messages
_OPTION_OF = {
    "data.expected_column": "label", "data.input_columns": "input_columns", "data.id_column": "id_column",
    "contract.output": "output", "contract.type": "output_type", "scorer.kind": "scorer",
    "program.allowed_functions": "allowed_functions", "program.seed": "seed_program", "dialect": "dialect",
    "splits.train_fraction": "train_fraction", "splits.test_fraction": "test_fraction",
    "splits.seed": "split_seed", "program.timeout_seconds": "timeout_seconds", "data.pool": "source",
    "data.test": "test_source",
}  # fmt: skip


def check_options(name: object, options: object, *, stored: bool = False) -> dict[str, Any]:
    """The task's name and options checked (`options.TASK_NAME`, `options.TASK_OPTIONS`): the options with each
    value as the table holds it, or a one-line TaskError before anything is written. `stored`: the task is read
    back from a store, where an older version may have registered a pack-style name (`options.PACK_NAME`)."""
    check_task_name(name, error=TaskError, stored=stored)
    given = as_object(options, f"task {name!r}: the options", error=TaskError)
    specified = {k: v for k, v in given.items() if k in AIFO_TASK_OPTIONS.names}
    checked = TASK_OPTIONS.check(
        {k: v for k, v in given.items() if k not in specified}, error=TaskError, prefix=f"task {name!r}: "
    )
    if specified:  # another tool's specification of the task: its kind reads it (`spec_reader`)
        specified = AIFO_TASK_OPTIONS.check(specified, error=TaskError, prefix=f"task {name!r}: ")
        if specified.get("spec") is None:
            raise TaskError(f"task {name!r}: option 'ai_function' goes with option 'spec'")
        checked = spec_reader(name, checked).options(name, {**checked, **specified})
    for required in ("label", "seed_program"):
        if not checked.get(required):
            raise TaskError(f"task {name!r}: option {required!r} is required")
    description = checked.get("description")
    if description is not None and (not description.strip() or "\n" in description.strip()):
        raise TaskError(f"task {name!r}: option 'description' must be a single non-empty line")
    test_fraction = checked.get("test_fraction")
    if checked.get("test_source") is not None and test_fraction:
        raise TaskError(
            f"task {name!r}: option 'test_fraction' must be 0 when option 'test_source' gives the test rows "
            f"(got {test_fraction!r})"
        )
    if checked.get("test_source") is None and test_fraction == 0:
        raise TaskError(
            f"task {name!r}: option 'test_fraction' is 0, which leaves no test rows: name a table or query of "
            "held-out rows as option 'test_source', or keep test_fraction above 0"
        )
    return checked


def kind_registrar(name: object, options: object) -> TaskRegistrar | None:
    """The registrar of the kind option `kind` names (`KindPlugin.registrar`); None for the default kind, whose
    task is built here from one source's rows (`task_from_rows`). A kind without a registrar is one line."""
    given = options.get("kind") if isinstance(options, Mapping) else None
    if given is None:
        return None
    chosen = TASK_OPTIONS["kind"].check(given, error=TaskError, prefix=f"task {name!r}: ")
    registrar = kind(chosen, task=str(name)).registrar
    if registrar is None and chosen != TASK_OPTIONS.default("kind"):
        takers = [
            k for k in kind_names() if k == TASK_OPTIONS.default("kind") or kind(k).registrar is not None
        ]
        raise TaskError(
            f"task {name!r}: coco_task does not register {chosen} tasks (kinds: {', '.join(takers)})"
        )
    return registrar


def spec_reader(name: str, options: Mapping[str, Any]) -> TaskSpec:
    """The task's kind's reader of option `spec` (`languages.base.TaskSpec`); one line when it has none."""
    chosen = str(options.get("kind") or TASK_OPTIONS.default("kind"))
    reader = kind(chosen).task_spec
    if reader is None:
        raise TaskError(f"task {name!r}: option 'spec' is not read by {chosen} tasks")
    return reader


def task_from_rows(
    name: str,
    source: str,
    options: Mapping[str, Any],
    rows: pd.DataFrame,
    types: Mapping[str, str],
    test_rows: pd.DataFrame | None = None,
) -> TaskPack:
    """The task `name` over `rows` (the source's columns, with their DuckDB `types`), checked like a pack; with
    `test_rows` (the rows of option `test_source`) as its test split. A new task's name was checked strictly
    first (`api.register_task`); a stored one may have an older name."""
    options = check_options(name, options, stored=True)
    id_column = str(options.get("id_column", "id"))
    label = str(options["label"])
    for role, column in (("id_column", id_column), ("label", label)):
        if column not in rows.columns:
            raise TaskError(
                f"task {name!r}: option {role!r} names column {column!r}, which {source!r} does not have "
                f"(columns: {', '.join(rows.columns)})"
            )
    if rows.empty:
        raise TaskError(f"task {name!r}: {source!r} has no rows")
    inputs = list(options.get("input_columns") or [c for c in rows.columns if c not in (id_column, label)])
    missing = [c for c in inputs if c not in rows.columns]
    if missing:
        raise TaskError(
            f"task {name!r}: option 'input_columns' names {missing[0]!r}, which {source!r} does not have"
        )
    output_type = str(options.get("output_type") or _contract_type(name, label, types[label]))
    if test_rows is not None:
        _check_test_rows(name, options, test_rows, [id_column, *inputs, label])
    with tempfile.TemporaryDirectory(prefix="coco-task-") as folder:
        root = Path(folder) / name
        (root / "data").mkdir(parents=True)
        for file, frame in (("pool.csv", rows), ("test.csv", test_rows)):
            if frame is None:
                continue
            table = frame[[id_column, *inputs, label]].copy()
            table[label] = [_cell(v, output_type) for v in table[label]]
            for column in inputs:
                table[column] = [_cell(v, types[column]) for v in table[column]]
            table.to_csv(root / "data" / file, index=False)
        (root / "seed.sql").write_text(str(options["seed_program"]))
        (root / "task.toml").write_text(
            _toml(name, source, options, id_column, label, {c: types[c] for c in inputs}, output_type, types)
        )
        try:
            return load_task(root, registered=True)
        except TaskError as error:
            raise TaskError(_in_options(name, str(error))) from None


def _check_test_rows(name: str, options: Mapping[str, Any], rows: pd.DataFrame, columns: list[str]) -> None:
    """The rows of option `test_source` hold the columns the task reads, and some rows."""
    where = f"task {name!r}: option 'test_source' ({options.get('test_source')!r})"
    missing = [c for c in columns if c not in rows.columns]
    if missing:
        raise TaskError(f"{where} has no column {missing[0]!r} (it needs {', '.join(columns)})")
    if rows.empty:
        raise TaskError(f"{where} has no rows")


EMBEDDING_FUNCTIONS = ("AI_EMBED", "AI_SIMILARITY")
"""What a classifying seed's search needs by default (issue 38): the learned heads, the proxy and cascades."""


def enabled_functions(options: Mapping[str, Any]) -> list[str]:
    """`allowed_functions` plus the AI functions the seed program calls (module docstring), each once; with no
    `allowed_functions` (or an empty list) and a seed that calls AI_CLASSIFY, also `EMBEDDING_FUNCTIONS`."""
    given = [str(f) for f in options.get("allowed_functions") or []]
    dialect = str(options.get("dialect", DEPLOY_DIALECT))
    called = ai_functions_called(str(options.get("seed_program") or ""), dialect)
    if not given and "AI_CLASSIFY" in called:
        given = list(EMBEDDING_FUNCTIONS)
    return given + [f for f in called if f not in {g.upper() for g in given}]


def _contract_type(name: str, label: str, duckdb_type: str) -> str:
    base = duckdb_type.upper()
    if base in _INTEGERS:
        return "INTEGER"
    if base.startswith("DECIMAL"):
        return "DOUBLE"
    if base in ("VARCHAR[]", "TEXT[]"):
        return "VARCHAR[]"
    if base in _CONTRACT_OF:
        return _CONTRACT_OF[base]
    raise TaskError(
        f"task {name!r}: the label column {label!r} is {duckdb_type}; a label must be INTEGER, DOUBLE, VARCHAR, "
        "BOOLEAN or VARCHAR[] (cast it in the source query, or set option 'output_type')"
    )


def _cell(value: Any, type_: str) -> str:
    """One CSV cell the loader reads back as `type_` (lists of labels joined with ';', other lists as JSON)."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, list | tuple):
        return ";".join(map(str, value)) if type_.upper() == "VARCHAR[]" else json.dumps(list(value))
    return str(value)


def _toml(
    name: str,
    source: str,
    options: Mapping[str, Any],
    id_column: str,
    label: str,
    inputs: Mapping[str, str],
    output_type: str,
    types: Mapping[str, str],
) -> str:
    q = json.dumps  # a JSON string is a valid TOML basic string
    lines = [
        f"name = {q(name)}",
        f"description = {q(str(options.get('description') or f'rows of {source}'))}",
        f"dialect = {q(str(options.get('dialect', DEPLOY_DIALECT)))}",
        "[data]",
        'pool = "data/pool.csv"',
        *(['test = "data/test.csv"'] if options.get("test_source") is not None else []),
        f"id_column = {q(id_column)}",
        f"expected_column = {q(label)}",
        "[data.input_columns]",
        *(f"{q(column)} = {q(type_)}" for column, type_ in inputs.items()),
        "[splits]",
        f"seed = {int(options.get('split_seed', 0))}",
        'mode = "partition"',
        f"train_fraction = {float(options.get('train_fraction', 0.5))}",
        f"test_fraction = {_test_fraction(options)}",
        "[contract]",
        f"output = {q(str(options.get('output') or label))}",
        f"type = {q(output_type)}",
        "[scorer]",
        f"kind = {q(str(options.get('scorer', 'exact')))}",
        "[program]",
        'seed = "seed.sql"',
        f"allowed_functions = {q(enabled_functions(options))}",
        f"timeout_seconds = {float(options.get('timeout_seconds', 10.0))}",
        "[source]",
        f"name = {q(source)}",
    ]
    if options.get("spec") is not None:  # the kind's own table: what the specification adds
        settings = spec_reader(name, options).settings(options, types)
        lines += _toml_table(str(options.get("kind") or TASK_OPTIONS.default("kind")), settings)
    return "\n".join(lines) + "\n"


def _toml_table(key: str, table: Mapping[str, Any]) -> list[str]:
    """`table` as TOML under `[key]`: scalars and lists (JSON's spelling is TOML's), sub-tables as `[key.sub]`."""
    lines = [f"[{key}]"]
    lines += [f"{json.dumps(k)} = {json.dumps(v)}" for k, v in table.items() if not isinstance(v, Mapping)]
    for sub, value in table.items():
        if isinstance(value, Mapping):
            lines += _toml_table(f"{key}.{json.dumps(sub)}", value)
    return lines


def _test_fraction(options: Mapping[str, Any]) -> float:
    """The option, else its default: 0.2 of the source, or 0 when `test_source` gives the test rows."""
    if options.get("test_fraction") is not None:
        return float(options["test_fraction"])
    return 0.0 if options.get("test_source") is not None else float(TASK_OPTIONS.default("test_fraction"))


def _in_options(name: str, message: str) -> str:
    """A loader message about the generated task.toml, as a message about the user's options."""
    message = re.sub(r"^\S*task\.toml: ", "", message)
    message = re.sub(r"^\S*seed\.sql", "option 'seed_program'", message)
    message = re.sub(r"^\S*data/test\.csv", "the rows of option 'test_source'", message)
    message = re.sub(r"^\S*data/pool\.csv", "the rows of the source", message)
    message = message.replace("also appears in the pool", "also appears in the source")
    message = re.sub(
        r"key '([\w.]+)'", lambda m: f"option {_OPTION_OF.get(m.group(1), m.group(1))!r}", message
    )
    return f"task {name!r}: {message}"
