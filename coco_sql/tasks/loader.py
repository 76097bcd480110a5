"""Loading and validating task packs.

A task pack is a directory ``<name>/`` holding ``task.toml``, a seed program and its data files. Everything
a run needs lives inside the pack (data is copied in, never referenced from elsewhere), so a pack can be
fingerprinted, shipped in the wheel and reloaded on ``--resume`` with the same result.

task.toml format (every key is validated; unknown keys are errors)::

    name = "lockpicking6"            # required; must equal the directory name; [a-z0-9][a-z0-9_-]*
    description = "one line"         # required; a single line
    language = "sql"                 # optional (default sql): a kind of `coco_sql.plugins` (sql | python | dbt | agent_spec | ...)
    dialect = "duckdb"               # optional (default duckdb): duckdb | snowflake (SQL programs)

    [data]                           # required
    pool = "data/pool.csv"           # required; labelled search pool (train/val come from here); files are
                                     #   inside the pack: no absolute path, no .., no symbolic link
    test = "data/test.csv"           # optional held-out file; without it test is carved from the pool
    id_column = "id"                 # optional (default "id"); ids are read as strings and must be unique
    expected_column = "label"        # required; parsed to contract.type (first bad id is reported)
    [data.input_columns]             # required, ordered: name = DuckDB type (VARCHAR kept verbatim,
    code = "VARCHAR"                 #   other types cast with empty cells as NULL)

    [splits]                         # required
    seed = 42                        # required integer in [0, 2147483647]
    mode = "partition"               # optional (default partition): partition | shared
    train_fraction = 0.34            # partition only (required there), in (0, 1); the rest of the pool is val
    test_fraction = 0.0              # partition only, in [0, 1); must be > 0 without data.test and 0 with it

    [contract]                       # required
    output = "label"                 # required column name the program must return (besides id)
    type = "INTEGER"                 # required: INTEGER | DOUBLE | VARCHAR | BOOLEAN | VARCHAR[]

    [scorer]                         # required
    kind = "exact"                   # exact | numeric | multilabel_f1 | token_match | sql | bound_ratio
    # numeric: abs_tol (default 1e-9), rel_tol (default 0.0); contract type INTEGER or DOUBLE
    # multilabel_f1: separator (default ";") for joined label strings; contract type VARCHAR[] or VARCHAR
    # sql: expression over `output` and `expected` returning a number clamped to [0, 1] (checked at load)
    # bound_ratio: expected / output, for a cost whose expected value is a lower bound (INTEGER or DOUBLE)

    [program]                        # required
    seed = "seed.sql"                # required; the seed program, in `dialect` (python: a module)
    allowed_functions = []           # optional: extra function names on top of the base SQL allow-list (SQL)
    timeout_seconds = 10.0           # optional (default 10.0), in (0, 3600]
    entry = "select_next_node"       # a kind's own keys (`KindPlugin.task_keys`); python, required: the
    harness = "harness.py"           #   function the harness calls, and `run(entry, instance) -> output`

    [source]                         # optional attribution: name, url, license, revision, notes (strings)

    [run]                            # optional: the run options this pack recommends (`PACK_RUN_OPTIONS` of
    minibatch = 8                    #   `options.RUN_OPTIONS`, same checks); a run's own options win

    [agent_spec]                     # optional: a table named after the language, that kind's own settings,
                                     #   checked by the kind (`languages.<kind>`); a string in it naming a file
                                     #   of the pack is checked as a pack path and fingerprinted

Split modes: ``partition`` splits the pool into train/val (and test when there is no test file) by the
fractions; ``shared`` uses the whole pool as both train and val (diagnostic tasks scored on all rows), and
the test file as test (or the pool again, when there is none, meaning nothing is held out).

Every problem is raised as a one-line :class:`~coco_sql.errors.TaskError` naming the file, the key and
the problem, e.g. ``tasks/foo/task.toml: key 'scorer.kind': must be one of ... (got 'bogus')``.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import duckdb

from coco_sql.errors import TaskError
from coco_sql.options import PACK_NAME, PACK_RUN_OPTIONS, RUN_OPTIONS, SPLIT_SEED, TASK_NAME, TIMEOUT_SECONDS
from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.plugins import BUILTIN_ENGINES, engine_names, kind, kind_names
from coco_sql.tasks.catalog import TASK_FILE
from coco_sql.tasks.coerce import CONTRACT_TYPES, DEFAULT_LIST_SEPARATOR
from coco_sql.tasks.pack_files import (
    Reader,
    check_duckdb_type,
    display,
    load_table,
    make_split,
    short,
    type_name,
)
from coco_sql.tasks.scorers import (
    SCORER_KINDS,
    BoundRatioScorer,
    ExactScorer,
    MultilabelF1Scorer,
    NumericScorer,
    Scorer,
    SqlScorer,
    TokenMatchScorer,
)
from coco_sql.tasks.splits import SPLIT_MODES, SPLIT_NAMES, Split, partition_ids

DIALECTS: tuple[str, ...] = tuple(BUILTIN_ENGINES)  # an installed engine adds its own (`engine_names`)


_COLUMN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FUNCTION_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.$]*$")

_TOP_KEYS = (
    "name",
    "description",
    "language",
    "dialect",
    "data",
    "splits",
    "contract",
    "scorer",
    "program",
    "source",
    "run",
)
_DATA_KEYS = ("pool", "test", "id_column", "expected_column", "input_columns")
_SPLIT_KEYS = ("seed", "mode", "train_fraction", "test_fraction")
_CONTRACT_KEYS = ("output", "type")
_PROGRAM_KEYS = ("seed", "allowed_functions", "timeout_seconds")
_SOURCE_KEYS = ("name", "url", "license", "revision", "notes")
_SCORER_KEYS: dict[str, tuple[str, ...]] = {
    "exact": (),
    "numeric": ("abs_tol", "rel_tol"),
    "multilabel_f1": ("separator",),
    "token_match": (),
    "sql": ("expression",),
    "bound_ratio": (),
}


@dataclass(frozen=True)
class Contract:
    """What a program must return: one row per id with column ``output`` of contract ``type``."""

    output: str
    type: str


@dataclass(frozen=True, eq=False)
class TaskPack:
    """A loaded, validated task pack. Splits are computed at load time and handed out as copies."""

    name: str
    description: str
    root: Path
    dialect: str
    input_columns: dict[str, str]
    contract: Contract
    scorer: Scorer
    seed_program: str
    allowed_functions: frozenset[str]
    timeout_seconds: float
    split_seed: int
    split_mode: str
    source: dict[str, str]
    _splits: Mapping[str, Split] = field(repr=False)
    _fingerprint: str = field(repr=False)
    language: str = "sql"  # the programs' kind (`coco_sql.plugins`): sql | python | ...
    entry: str | None = None  # python: the function the harness calls (a kind's `task_keys`)
    harness: str | None = None  # python: the harness module's source (trusted pack code, runs in the sandbox)
    settings: Mapping[str, Any] = field(default_factory=dict)  # the table named after the kind, as written
    settings_files: Mapping[str, Path] = field(default_factory=dict)  # its strings naming pack files: checked
    kind_data: Any = None  # what a kind with its own pack loader adds (`KindPlugin.pack_loader`)
    run_defaults: Mapping[str, Any] = field(default_factory=dict)  # [run]: options a run does not set itself
    id_column: str = "id"  # the data's own name for the instance id (programs read it as `id`)

    def split(self, name: str) -> Split:
        """Return split ``name`` (train, val or test). Copies, so callers cannot corrupt the cache."""
        if name not in self._splits:
            raise TaskError(f"task '{self.name}': no split named {name!r} (known: {', '.join(SPLIT_NAMES)})")
        cached = self._splits[name]
        expected = {k: list(v) if isinstance(v, list) else v for k, v in cached.expected.items()}
        return Split(name=cached.name, inputs=cached.inputs.copy(), expected=expected)

    def with_rows(self, name: str, ids: Sequence[str]) -> TaskPack:
        """The same task with split `name` restricted to its rows `ids` (a minibatch's training rows, for the
        mutator's environment); the other splits are dropped, so nothing built on it can read them."""
        if name not in self._splits:
            self.split(name)  # the one-line TaskError
        return replace(self, _splits={name: self._splits[name].subset(ids)})  # subset copies only those rows

    @property
    def uses_ai(self) -> bool:
        """True when the task calls AI (its runs then get the AI runtime, its sandboxes the AI UDFs): its kind
        says (`KindPlugin.uses_ai`; SQL and dbt: it enables an AI function)."""
        asks = kind(self.language, task=self.name).uses_ai
        return asks is not None and bool(asks(self))

    def fingerprint(self) -> str:
        """sha256 (hex) over task.toml, the seed program, the harness (python) and the data files, as read at
        load time."""
        return self._fingerprint


@dataclass(frozen=True)
class TaskInfo:
    """One entry of :func:`list_tasks`: either a loaded ``pack`` or the one-line ``error`` it raised.

    Listing never fails because one pack is broken; the CLI shows the error next to the name instead.
    """

    name: str
    root: Path
    pack: TaskPack | None = None
    error: str | None = None

    @property
    def description(self) -> str:
        """The pack's description, or ``(broken: <error>)`` so a listing shows why a pack is unusable."""
        return self.pack.description if self.pack is not None else f"(broken: {self.error})"

    @property
    def source(self) -> dict[str, str]:
        """The pack's attribution (empty for a broken pack)."""
        return dict(self.pack.source) if self.pack is not None else {}


# --------------------------------------------------------------------------------------------- helpers


def _fingerprint(root: Path, files: Sequence[Path]) -> str:
    digest = hashlib.sha256()
    for path in files:
        content = path.read_bytes()
        label = path.relative_to(root).as_posix().encode()
        digest.update(len(label).to_bytes(8, "big") + label + len(content).to_bytes(8, "big") + content)
    return digest.hexdigest()


def _settings_files(reader: Reader, root: Path, table: Mapping[str, Any], key: str) -> dict[str, Path]:
    """The strings of a kind's table (at any depth) that name a file of the pack, each checked as a pack path
    (`Reader.file_path`): the kind reads its files through these, and the fingerprint covers them."""
    found: dict[str, Path] = {}
    for name, value in table.items():
        where = f"{key}.{name}"
        if isinstance(value, dict):
            found |= _settings_files(reader, root, value, where)
        elif isinstance(value, str) and "\n" not in value and (root / value).is_file():
            found[value] = reader.file_path(root, {name: value}, where)  # type: ignore[assignment]
    return found


# ------------------------------------------------------------------------------------------- loading


def _build_scorer(reader: Reader, table: Mapping[str, Any], contract: Contract) -> tuple[Scorer, str]:
    """Return the scorer and the separator used to parse joined list strings in the expected column."""
    kind = reader.choice(table, "scorer.kind", SCORER_KINDS)
    reader.check_keys(table, "scorer", ("kind", *_SCORER_KEYS[kind]))
    if kind == "exact":
        return ExactScorer(type_=contract.type), DEFAULT_LIST_SEPARATOR
    if kind in ("numeric", "bound_ratio") and contract.type not in ("INTEGER", "DOUBLE"):
        raise reader.error(
            "scorer.kind", f"'{kind}' needs contract type INTEGER or DOUBLE, not {contract.type}"
        )
    if kind == "bound_ratio":
        return BoundRatioScorer(), DEFAULT_LIST_SEPARATOR
    if kind == "numeric":
        tolerances = {}
        for key, default in (("abs_tol", 1e-9), ("rel_tol", 0.0)):
            value = reader.get(table, f"scorer.{key}", float, default)
            if not value >= 0:
                raise reader.error(f"scorer.{key}", f"must be >= 0 (got {value!r})")
            tolerances[key] = value
        return NumericScorer(**tolerances), DEFAULT_LIST_SEPARATOR
    if kind == "multilabel_f1":
        if contract.type not in ("VARCHAR[]", "VARCHAR"):
            raise reader.error(
                "scorer.kind",
                f"'multilabel_f1' needs contract type VARCHAR[] or VARCHAR, not {contract.type}",
            )
        separator = reader.get(table, "scorer.separator", str, DEFAULT_LIST_SEPARATOR)
        if not separator:
            raise reader.error("scorer.separator", "must be a non-empty string")
        return MultilabelF1Scorer(separator=separator), separator
    if kind == "token_match":
        if contract.type != "VARCHAR":
            raise reader.error(
                "scorer.kind", f"'token_match' needs contract type VARCHAR, not {contract.type}"
            )
        return TokenMatchScorer(), DEFAULT_LIST_SEPARATOR
    expression = reader.get(table, "scorer.expression", str)
    scorer = SqlScorer(expression=expression, type_=contract.type)
    try:
        scorer.validate()
    except ValueError as error:
        raise reader.error("scorer.expression", f"invalid SQL expression: {error}") from None
    return scorer, DEFAULT_LIST_SEPARATOR


def _load_pack(root: Path, *, registered: bool = False) -> TaskPack:
    """The pack at `root`. `registered`: a task registered from rows (`tasks.from_rows`), whose name may also be
    an identifier (`options.TASK_NAME`), not only a pack directory's lower-case name (`options.PACK_NAME`)."""
    toml_path = root / TASK_FILE
    reader = Reader(toml_path)
    if not toml_path.is_file():
        raise TaskError(f"{reader.file}: not found (a task pack is a directory with a {TASK_FILE})")
    toml_bytes = toml_path.read_bytes()
    try:
        doc = tomllib.loads(toml_bytes.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise TaskError(f"{reader.file}: invalid TOML: not UTF-8 ({error.reason})") from None
    except tomllib.TOMLDecodeError as error:
        raise TaskError(f"{reader.file}: invalid TOML: {error}") from None
    named = doc.get("language")
    if isinstance(named, str) and named in kind_names():
        plugin = kind(named)
        if plugin.pack_loader is not None:  # a kind whose packs have tables of their own (dbt)
            return plugin.pack_loader(root, reader, doc, _fingerprint)
    reader.check_keys(doc, "", _TOP_KEYS + kind_names())

    name = reader.get(doc, "name", str)
    if not (PACK_NAME.fullmatch(name) or (registered and TASK_NAME.fullmatch(name))):
        raise reader.error("name", f"must match {PACK_NAME.pattern} (got {name!r})")
    if name != root.name:
        raise reader.error("name", f"must equal the pack directory name {root.name!r} (got {name!r})")
    description = reader.get(doc, "description", str)
    if "\n" in description.strip() or not description.strip():
        raise reader.error("description", "must be a single non-empty line")
    language = reader.choice(doc, "language", kind_names(), "sql")
    task_keys = kind(language).task_keys
    dialect = reader.choice(doc, "dialect", engine_names(), SANDBOX_DIALECT)
    for other in kind_names():
        if other in doc and other != language:
            raise reader.error(other, f"only a task with language = {other!r} has this table")
    settings = reader.get(doc, language, dict, {})
    settings_files = _settings_files(reader, root, settings, language)

    con = duckdb.connect(":memory:")
    try:
        data = reader.table(doc, "data", _DATA_KEYS)
        pool_path = reader.file_path(root, data, "data.pool")
        test_path = reader.file_path(root, data, "data.test", None)
        id_column = reader.get(data, "data.id_column", str, "id")
        expected_column = reader.get(data, "data.expected_column", str)
        raw_inputs = reader.get(data, "data.input_columns", dict)
        if not raw_inputs:
            raise reader.error("data.input_columns", "must declare at least one input column")
        input_columns: dict[str, str] = {}
        for column, type_ in raw_inputs.items():
            key = f"data.input_columns.{column}"
            if not _COLUMN_RE.match(column):
                raise reader.error(key, "column names must be plain identifiers ([A-Za-z_][A-Za-z0-9_]*)")
            if column in ("id", id_column):
                raise reader.error(key, "'id' and the id column are reserved for the instance id")
            if column == expected_column:
                raise reader.error(key, "the expected column must not be an input (it would leak the label)")
            if not isinstance(type_, str):
                raise reader.error(key, f"expected string (a DuckDB type), got {type_name(type_)}")
            input_columns[column] = check_duckdb_type(reader, key, type_.strip(), con)

        splits = reader.table(doc, "splits", _SPLIT_KEYS)
        split_seed = reader.bounded(splits, "splits.seed", replace(SPLIT_SEED, default=...))
        split_mode = reader.choice(splits, "splits.mode", SPLIT_MODES, "partition")
        train_fraction = test_fraction = 0.0
        if split_mode == "shared":
            for key in ("train_fraction", "test_fraction"):
                if key in splits:
                    raise reader.error(f"splits.{key}", "only allowed with mode 'partition'")
        else:
            train_fraction = reader.get(splits, "splits.train_fraction", float)
            if not 0 < train_fraction < 1:
                raise reader.error("splits.train_fraction", f"must be in (0, 1) (got {train_fraction!r})")
            test_fraction = reader.get(splits, "splits.test_fraction", float, 0.0)
            if not 0 <= test_fraction < 1:
                raise reader.error("splits.test_fraction", f"must be in [0, 1) (got {test_fraction!r})")
            if test_path is not None and test_fraction > 0:
                raise reader.error("splits.test_fraction", "must be 0 when data.test gives a test file")
            if test_path is None and test_fraction == 0:
                raise reader.error("splits.test_fraction", "must be > 0 when there is no data.test file")
            if train_fraction + test_fraction >= 1:
                raise reader.error(
                    "splits.train_fraction", "train_fraction + test_fraction must leave rows for val (< 1)"
                )

        contract_table = reader.table(doc, "contract", _CONTRACT_KEYS)
        output = reader.get(contract_table, "contract.output", str)
        if not _COLUMN_RE.match(output) or output == "id":
            raise reader.error(
                "contract.output", f"must be a plain identifier other than 'id' (got {output!r})"
            )
        contract_type = reader.get(contract_table, "contract.type", str).strip().upper()
        if contract_type not in CONTRACT_TYPES:
            raise reader.error(
                "contract.type", f"must be one of {', '.join(CONTRACT_TYPES)} (got {contract_type!r})"
            )
        contract = Contract(output=output, type=contract_type)

        scorer_table = reader.table(
            doc, "scorer", ("kind", *sorted({k for v in _SCORER_KEYS.values() for k in v}))
        )
        scorer, separator = _build_scorer(reader, scorer_table, contract)

        program_keys = _PROGRAM_KEYS + (task_keys.program_keys if task_keys is not None else ())
        program = reader.table(doc, "program", program_keys)
        seed_path = reader.file_path(root, program, "program.seed")
        assert seed_path is not None
        try:
            seed_program = seed_path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise reader.error("program.seed", f"{display(seed_path)} is not UTF-8 text") from None
        if not seed_program.strip():
            raise reader.error("program.seed", f"{display(seed_path)} is empty")
        functions = reader.get(program, "program.allowed_functions", list, [])
        for function in functions:
            if not isinstance(function, str) or not _FUNCTION_RE.match(function):
                raise reader.error("program.allowed_functions", f"not a function name: {short(function)}")
        timeout_seconds = float(reader.bounded(program, "program.timeout_seconds", TIMEOUT_SECONDS))
        kind_fields, kind_files = task_keys.read(reader, root, program) if task_keys is not None else ({}, [])

        source_table = reader.table(doc, "source", _SOURCE_KEYS, required=False)
        source = {key: reader.get(source_table, f"source.{key}", str) for key in source_table}
        run_defaults = read_run_defaults(reader, doc)

        load = {
            "id_column": id_column,
            "expected_column": expected_column,
            "input_columns": input_columns,
            "contract_type": contract_type,
            "separator": separator,
            "con": con,
        }
        assert pool_path is not None
        pool = load_table(pool_path, reader, **load)
        test = load_table(test_path, reader, **load) if test_path is not None else None
    finally:
        con.close()

    pool_ids = sorted(pool.expected)
    if test is not None:
        overlap = sorted(set(pool_ids) & set(test.expected))
        if overlap:
            raise TaskError(
                f"{display(test_path)}: id '{overlap[0]}' also appears in the pool (key 'data.test'): "  # type: ignore[arg-type]
                "test rows must be held out"
            )
    if split_mode == "shared":
        assigned = {"train": pool_ids, "val": pool_ids}
        assigned["test"] = sorted(test.expected) if test is not None else pool_ids
    else:
        assigned = partition_ids(pool_ids, split_seed, train_fraction, test_fraction)
        if test is not None:
            assigned["test"] = sorted(test.expected)
    for split_name in SPLIT_NAMES:
        if not assigned[split_name]:
            key = "splits.test_fraction" if split_name == "test" else "splits.train_fraction"
            raise reader.error(key, f"leaves the {split_name} split empty ({len(pool_ids)} pool rows)")
    tables = [pool] if test is None else [pool, test]
    split_objects = {n: make_split(n, assigned[n], tables) for n in SPLIT_NAMES}

    files = [toml_path, seed_path, pool_path] + ([test_path] if test_path is not None else [])
    files += kind_files
    files += sorted(set(settings_files.values()) - set(files))
    return TaskPack(
        name=name,
        description=description.strip(),
        root=root,
        dialect=dialect,
        input_columns=input_columns,
        contract=contract,
        scorer=scorer,
        seed_program=seed_program,
        allowed_functions=frozenset(f.upper() for f in functions),
        timeout_seconds=timeout_seconds,
        split_seed=split_seed,
        split_mode=split_mode,
        source=source,
        _splits=split_objects,
        _fingerprint=_fingerprint(root, files),
        language=language,
        **kind_fields,
        settings=settings,
        settings_files=settings_files,
        run_defaults=run_defaults,
        id_column=id_column,
    )


def read_run_defaults(reader: Reader, doc: Mapping[str, Any]) -> dict[str, Any]:
    """The pack's `[run]` table: run options it recommends (a data agent's pack, whose every question is model
    calls, samples a minibatch), each checked as `coco_evolve` checks it. A run's own options win over them."""
    table = reader.table(doc, "run", PACK_RUN_OPTIONS, required=False)
    defaults = {}
    for name, value in table.items():
        try:
            defaults[name] = RUN_OPTIONS[name].check(value, error=TaskError)
        except TaskError:
            raise reader.error(
                f"run.{name}", f"must be {RUN_OPTIONS[name].expects()} (got {short(value)})"
            ) from None
    return defaults


# ---------------------------------------------------------------------------------------- discovery
