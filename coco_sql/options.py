"""Every option a user gives coco-sql, in one place: its type, its range, its default and one line of doc.

One table per call: `TASK_OPTIONS` (`coco_task`'s options; a kind's own are its plug-in's `task_options`, option `kind`), `RUN_OPTIONS` (`coco_evolve`'s, the fields of
`RunOptions`, which `engine.RunConfig` checks, and the CLI flags of `coco-sql evolve`), `AI_OPTIONS` (`coco_evolve`'s model choices),
`offline_settings()` and `AGENT_SETTINGS` (the `mutator_settings` of the offline mutator, composed from the kinds' typed
settings, and of the coding agent) and
`TOOL_ARGUMENTS` (the integer arguments of the history tools, `coco-sql history -n`). `TASK_NAME` is the pattern a
registered task's name matches.

Why bounds at all: a value reaches memory (one archive per island), a thread's timer (a deadline) or a SQL
parameter (BIGINT), and a value past what those hold failed late, with a traceback, after the run row was written
(issue 25). Each bound is generous for real use and far below what breaks: checked here, a value out of range is a
one-line error naming the option, what it takes and what it got, before anything is written.

`OptionTable.rows()` gives a table as plain rows (name, type, range, default, example, doc) for printing
(`CALL coco_help('coco_task')`, the README's tables, which a test compares with these rows). This module imports nothing of coco-sql but its errors (and, in the functions that compose the kinds' tables,
the plug-in registry), so that every layer may read it; the choices of
registries (parent policies, mutators) are checked by their owners (`engine.RunConfig`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from coco_sql.errors import CocoError, ConfigError

MAX_SEED = 2**31 - 1  # a seed any model provider and numpy accept
MAX_AMOUNT = 1e15  # a spend or cost limit past this is no limit, and float() of a larger int may overflow
TASK_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
"""A registered task's name: an identifier (it names files in a temporary folder, rows and a view)."""
PACK_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")
"""A task pack's name (its directory's); a task registered before `TASK_NAME` may have one too."""


@dataclass(frozen=True)
class Option:
    """One option. `kind` is integer | number | boolean | string | choice | strings | object | amount (a number or
    a text such as '200000 tokens', parsed by its owner). `low`/`high` bound integers and numbers (inclusive
    unless `open_low`/`open_high`); `choices` are a choice's values. None is accepted where `nullable` (it means
    the default, or off)."""

    name: str
    kind: str
    default: Any
    doc: str
    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    choices: tuple[str, ...] = ()
    nullable: bool = False
    example: str = ""  # a value as a user writes it in SQL, for `coco_help` and the README

    @property
    def type(self) -> str:
        """The type as a table shows it."""
        return {"strings": "list of strings", "amount": "number or text"}.get(self.kind, self.kind)

    @property
    def range(self) -> str:
        """The values it takes, as a table shows them: '[1, 64]', '(0, 3600]', 'exact | numeric', ''."""
        if self.choices:
            return " | ".join(self.choices)
        if self.low is None and self.high is None:
            return ""
        low = "" if self.low is None else _number(self.low)
        high = "" if self.high is None else _number(self.high)
        return f"{'(' if self.open_low else '['}{low}, {high}{')' if self.open_high else ']'}"

    def expects(self) -> str:
        """What a value must be, for messages: 'an integer in [1, 64]'."""
        within = f" in {self.range}" if self.range and not self.choices else ""
        return {
            "integer": f"an integer{within}",
            "number": f"a number{within}",
            "boolean": "true or false",
            "string": "a string",
            "choice": f"one of {', '.join(self.choices)}",
            "strings": "a list of strings",
            "object": "an object such as {'key': value}",
            "amount": f"a number up to {_number(MAX_AMOUNT)} or a text such as '200000 tokens'",
        }[self.kind]

    def check(
        self, value: Any, *, error: type[CocoError] = ConfigError, prefix: str = "", label: str | None = None
    ) -> Any:
        """`value` as the option holds it (an integral float as an int, an int as a float for a number); else
        `error` with one line: '<prefix><label> must be an integer in [1, 64] (got 100000000)', the label
        "option 'islands'" unless given (a setting, a command-line flag)."""
        if value is None and self.nullable:
            return None
        checked = self._checked(value)
        if checked is _BAD:
            label = label or f"option {self.name!r}"
            raise error(f"{prefix}{label} must be {self.expects()} (got {_shown(value)})")
        return checked

    def _checked(self, value: Any) -> Any:
        if self.kind in ("integer", "number"):
            return self._in_range(value)
        if self.kind == "boolean":
            return value if isinstance(value, bool) else _BAD
        if self.kind == "string":
            return value if isinstance(value, str) else _BAD
        if self.kind == "choice":
            return value if isinstance(value, str) and value in self.choices else _BAD
        if self.kind == "strings":
            ok = isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)
            return list(value) if ok else _BAD
        if self.kind == "object":
            return value if isinstance(value, Mapping) else _BAD
        if isinstance(value, str):  # amount
            return value
        number = _as_number(value)
        return value if number is not None and abs(number) <= MAX_AMOUNT else _BAD

    def _in_range(self, value: Any) -> Any:
        number = _as_number(value)
        if number is None:
            return _BAD
        if self.kind == "integer":
            if isinstance(value, float) and not value.is_integer():
                return _BAD
            number = int(value)
        else:
            number = float(number)
        low_ok = self.low is None or (number > self.low if self.open_low else number >= self.low)
        high_ok = self.high is None or (number < self.high if self.open_high else number <= self.high)
        return number if low_ok and high_ok else _BAD


@dataclass(frozen=True)
class OptionTable:
    """The options of one call, in the order a table shows them."""

    title: str
    options: tuple[Option, ...]

    def __getitem__(self, name: str) -> Option:
        for option in self.options:
            if option.name == name:
                return option
        raise KeyError(name)

    def __iter__(self) -> Iterator[Option]:
        return iter(self.options)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.options)

    def default(self, name: str) -> Any:
        return self[name].default

    def check(
        self, given: Mapping[str, Any], *, error: type[CocoError] = ConfigError, prefix: str = ""
    ) -> dict[str, Any]:
        """`given` with each value checked (`Option.check`); an unknown key is `error` naming the known ones."""
        unknown = sorted((str(k) for k in given if k not in self.names), key=str)
        if unknown:
            raise error(f"{prefix}unknown option {unknown[0]!r} (options: {', '.join(self.names)})")
        return {name: self[name].check(value, error=error, prefix=prefix) for name, value in given.items()}

    def rows(self) -> list[dict[str, str]]:
        """The table as plain rows: name, type, range, default, example, doc (all text)."""
        return [
            {"name": o.name, "type": o.type, "range": o.range, "default": _default(o.default),
             "example": o.example, "doc": o.doc}
            for o in self.options
        ]  # fmt: skip


def setting(default: Any, doc: str, *, kind: str | None = None, **bounds: Any) -> Any:
    """A field of a settings dataclass (a kind's offline settings, `languages.kind.OfflineSettings`) that carries
    its option: the field's type, default, range and doc are declared once, here (`settings_table` reads them).
    `kind` defaults to the default's type (bool: boolean, int: integer, float: number, str: string, list:
    strings)."""
    kind = kind or _KIND_OF.get(type(default), "object")
    option = Option("", kind, default, doc, **bounds)
    if isinstance(default, list | dict):
        return field(default_factory=lambda: type(default)(default), metadata={"option": option})
    return field(default=default, metadata={"option": option})


def settings_table(cls: type, title: str) -> OptionTable:
    """The option table of a settings dataclass whose fields are `setting`s, in field order."""
    return OptionTable(
        title,
        tuple(replace(f.metadata["option"], name=f.name) for f in fields(cls) if "option" in f.metadata),
    )


_KIND_OF = {bool: "boolean", int: "integer", float: "number", str: "string", list: "strings", dict: "object"}


def as_object(value: Any, what: str, *, error: type[CocoError] = ConfigError) -> Mapping[str, Any]:
    """`value` when it is an object (a mapping), {} for None; else one line saying `what` must be one."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise error(f"{what} must be an object such as {{'seed': 1}} (got {_kind(value)} {_shown(value)})")
    return value


def check_task_name(name: Any, *, error: type[CocoError] = ConfigError, stored: bool = False) -> str:
    """`name` when it matches `TASK_NAME` (or, for a task `stored` in a store already, `PACK_NAME`, which older
    versions registered: neither holds a path); else one line, before anything is written under that name."""
    fits = isinstance(name, str) and (
        TASK_NAME.fullmatch(name) is not None or (stored and PACK_NAME.fullmatch(name) is not None)
    )
    if not fits:
        raise error(
            f"a task name is a letter or _ then up to 63 letters, digits or _ (got {_shown(name)}): it names a "
            "folder, rows and a view, so it may not be a path"
        )
    return name


_BAD = object()


def _as_number(value: Any) -> float | None:
    """A finite int or float (not a bool), as a float; None for anything else."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int):
        return float(value) if abs(value) <= 2**1000 else None
    return value if math.isfinite(value) else None


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e16 else f"{value:g}"


def _default(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping) and not value:
        return "{}"
    if isinstance(value, Sequence) and not isinstance(value, str) and not value:
        return "[]"
    return str(value)


def _kind(value: Any) -> str:
    return {str: "a string", list: "a list", int: "a number", float: "a number", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


CONTRACT_TYPES = ("INTEGER", "DOUBLE", "VARCHAR", "BOOLEAN", "VARCHAR[]")
MAX_TIMEOUT_S = 3600.0  # one evaluation's deadline; a thread's timer overflows near 1e8 s

TIMEOUT_SECONDS = Option(
    "timeout_seconds", "number", 10.0, "a program's deadline on one split, seconds, once its AI calls are cached "
    "(task.toml: program.timeout_seconds)", low=0, high=MAX_TIMEOUT_S, open_low=True, example="30",
)  # fmt: skip
SPLIT_SEED = Option(
    "split_seed", "integer", 0, "the seed of the train/val/test assignment (task.toml: splits.seed)",
    low=0, high=MAX_SEED, example="7",
)  # fmt: skip

TASK_OPTIONS = OptionTable(
    "coco_task(name, source, options)",
    (
        Option("kind", "string", "sql", "the program kind, task.toml's language (default: a SQL program over "
               "the source's rows); a kind's own options: CALL coco_help('coco_task <kind>'), e.g. 'coco_task dbt'",
               example="'dbt'"),
        Option("label", "string", None, "required: the label column", nullable=True, example="'label'"),
        Option("seed_program", "string", None, "required: the SQL program to start from, over `input`; the AI "
               "functions it calls are enabled", nullable=True,
               example="'SELECT id, AI_CLASSIFY(question, [''bridge'', ''comparison'']):labels[0]::string AS "
                       "label FROM input'"),
        Option("input_columns", "strings", None, "the input columns (default: every column but the id and "
               "the label)", nullable=True, example="['question']"),
        Option("id_column", "string", "id", "the id column (ids are read as text and must be unique)",
               example="'question_id'"),
        Option("output", "string", None, "the program's output column (default: the label's name)",
               nullable=True, example="'label'"),
        Option("output_type", "choice", None, "the output's type (default: from the label column's type)",
               choices=CONTRACT_TYPES, nullable=True, example="'VARCHAR'"),
        Option("scorer", "choice", "exact", "how an output is scored against its label",
               choices=("exact", "numeric", "multilabel_f1", "token_match", "bound_ratio"),
               example="'multilabel_f1'"),
        Option("allowed_functions", "strings", [], "functions the search may use on top of the base list and the "
               "seed's AI functions", nullable=True, example="['AI_EMBED', 'AI_SIMILARITY']"),
        Option("dialect", "choice", "snowflake", "the dialect programs are written in",
               choices=("snowflake", "duckdb"), example="'duckdb'"),
        Option("test_source", "string", None, "the held-out test rows: a table name or one SELECT query with "
               "the source's id, input and label columns (default: test_fraction of the source)",
               nullable=True, example="'questions_test'"),
        Option("train_fraction", "number", 0.5, "the share of rows in train", low=0, high=1, open_low=True,
               open_high=True, example="0.6"),
        Option("test_fraction", "number", 0.2, "the share of the source held out for test, taken first "
               "(with test_source: 0, the default)", low=0, high=1, open_high=True,
               example="0.25"),
        SPLIT_SEED,
        TIMEOUT_SECONDS,
        Option("description", "string", None, "one line (default: 'rows of <source>')", nullable=True,
               example="'HotpotQA question types'"),
    ),
)  # fmt: skip

AIFO_TASK_OPTIONS = OptionTable(
    "coco_task(name, source, {'spec': ...}): a Snowflake AI_FUNCTION_OPTIMIZATION specification as the task; "
    "it sets label, seed_program, input_columns, scorer, dialect and output_type, and the other coco_task "
    "options apply as well",
    (
        Option("spec", "string", None, "the AI_FUNCTION_OPTIMIZATION specification: its YAML, as CREATE "
               "EXPERIMENT ... FROM SPECIFICATION $$ ... $$ takes it", nullable=True,
               example="$$function: {function_body: ...} ...$$"),
        Option("ai_function", "string", None, "the CREATE AI FUNCTION statement of the function the spec's "
               "function.function_name names (a spec with function.function_body needs none)",
               nullable=True, example="$$CREATE AI FUNCTION db.sch.classify_ticket(body VARCHAR) ...$$"),
    ),
)  # fmt: skip


@dataclass(frozen=True)
class RunOptions:
    """`coco_evolve`'s options, the fields of `engine.RunConfig` (which adds their checks and what a run reads of
    them): each field's type, default, range and doc are declared once, here; `RUN_OPTIONS` is their table."""

    seed: int = setting(0, "the run's seed: same seed, same run", low=0, high=MAX_SEED, example="1")
    budget: int = setting(60, "mutation iterations", low=0, high=100_000, example="30")
    islands: int = setting(2, "MAP-Elites islands, each its own archive", low=1, high=64, example="4")
    migration_interval: int = setting(
        10, "iterations between ring migrations of the islands", low=1, high=100_000
    )
    policy: str = setting(
        "lp_roster", "the parent policy: lp_roster | map_elites | rare_capability | pareto | best"
    )
    mutator: str = setting(
        "offline", "the mutator: offline | agent | gepa_like | openevolve_like | prompt_only"
    )
    mutator_settings: Mapping[str, Any] = setting(
        {}, "the mutator's own settings (the offline and agent tables)", example="{'max_drafts': 8}"
    )
    targeting: str = setting(
        "infogain", "how the curator picks target rows", kind="choice", choices=("infogain", "uniform")
    )
    admission: str = setting(
        "map_elites",
        "archive admission: beat the cell's occupant, or raise the population's J_p",
        kind="choice",
        choices=("map_elites", "jp"),
    )
    history: bool = setting(
        True, "the mutator may read the search history (false: parent-local)", example="false"
    )
    target: float | None = setting(
        None,
        "stop once the best validation score reaches this",
        kind="number",
        low=0,
        high=1,
        nullable=True,
        example="1.0",
    )
    max_spend: int | str | None = setting(
        None,
        "pause the run once its models spent this: '200000 tokens' or '$5'",
        kind="amount",
        nullable=True,
        example="'50000 tokens'",
    )
    prices: Mapping[str, tuple[float, float]] = setting(
        {}, "model -> [USD per 1M input tokens, per 1M output tokens]"
    )
    max_cost: int | float | str | None = setting(
        None,
        "a child over this deploy cost per 1,000 rows is never "
        "admitted: '500 calls', '20000 tokens' or '$0.05'",
        kind="amount",
        nullable=True,
    )
    champion: str = setting(
        "cheapest_within_se",
        "the champion: the cheapest program to deploy within one "
        "standard error of the best validation score, or the best whatever it costs",
        kind="choice",
        choices=("cheapest_within_se", "best"),
    )
    minibatch: int = setting(
        0, "rows the mutator works on, and a child must gain on first (0: all)", low=0, high=1_000_000
    )
    primitives: bool = setting(False, "PACE: a library of primitives credited by Thompson sampling")
    primitive_k: int = setting(3, "with primitives: at most this many per program", low=1, high=32)
    primitive_generation: int = setting(
        5,
        "with primitives: generate one every this many iterations without extraction (0: never)",
        low=0,
        high=100_000,
    )
    model_aliases: Mapping[str, str] = setting(
        {}, "model name the SQL writes -> the model that answers it here"
    )
    task_path: str | None = setting(
        None,
        "where the task pack was read from, when it was given as a path "
        "(resume, export and check-deploy find it there)",
        kind="string",
        nullable=True,
    )


RUN_OPTIONS = settings_table(RunOptions, "coco_evolve(task, budget, options) and coco-sql evolve")

PACK_RUN_OPTIONS = ("islands", "policy", "targeting", "admission", "minibatch", "primitives", "primitive_k")
"""The run options a task pack may recommend in its `[run]` table (`tasks.loader`): how a run searches, never
its seed, budget or spend, which are the user's."""

AI_OPTIONS = OptionTable(
    "coco_evolve's model choices (not stored with the run)",
    (
        Option("classify_model", "string", None, "the model of AI_CLASSIFY / AI_FILTER", nullable=True,
               example="'openai/gpt-4o-mini'"),
        Option("completion_model", "string", None, "the model of AI_COMPLETE / AI_EXTRACT / AI_AGG",
               nullable=True),
    ),
)  # fmt: skip

PROMPT_ONLY_SETTINGS = OptionTable(
    "mutator_settings of the prompt_only baseline (Snowflake's optimizer's search space: the AI call's prompt "
    "and model)",
    (
        Option("max_drafts", "integer", 32, "drafts tested on training rows per iteration", low=1, high=1024),
        Option("max_examples", "integer", 0, "few-shot examples per call (0: no cap)", low=0, high=10_000),
        Option("models", "strings", [], "candidate models of an AI_COMPLETE call, besides a spec's "
               "optimization.models", example="['claude-haiku-4-5', 'openai-gpt-5-nano']"),
    ),
)  # fmt: skip

AGENT_SETTINGS = OptionTable(
    "mutator_settings of the coding agent (agent, gepa_like, openevolve_like)",
    (
        Option("model", "string", "", "required: the chat model, e.g. openai/gpt-4o-mini"),
        Option("mode", "choice", "self_test", "self_test | agentic (no test_draft) | static (one-shot)",
               choices=("static", "agentic", "self_test")),
        Option("prompt", "choice", "static_task", "the one-shot prompt (mode static)",
               choices=("static_task", "gepa_task", "openevolve_task")),
        Option("ledger", "boolean", True, "show the strategy ledger"),
        Option("history", "boolean", True, "offer the history tools"),
        Option("offline_tools", "boolean", True, "offer offline_search"),
        Option("max_turns", "integer", 16, "model calls per mutation", low=1, high=1000),
        Option("max_tokens", "integer", 60_000, "prompt + completion tokens per mutation", low=1,
               high=10_000_000),
        Option("wall_s", "number", 300.0, "seconds per mutation", low=0, high=86_400, open_low=True),
        Option("max_tests", "integer", 3, "draft tests per mutation (test_draft and show_draft together)",
               low=1, high=3),
        Option("test_rows", "integer", 10, "training rows a draft test shows", low=1, high=10),
        Option("max_invalid", "integer", 3, "invalid candidates before the mutation is discarded", low=1,
               high=100),
        Option("max_tool_errors", "integer", 5, "failed tool calls in a row before it is discarded", low=1,
               high=100),
        Option("max_silent_turns", "integer", 2, "answers without a tool call before it is discarded", low=1,
               high=100),
        Option("tool_choice", "choice", "auto", "auto | required | forced (each turn names its tool)",
               choices=("auto", "required", "forced")),
        Option("temperature", "number", 0.0, "the model's sampling temperature", low=0, high=2),
        Option("max_output_tokens", "integer", 1024, "tokens per answer", low=1, high=1_000_000),
        Option("reflector_model", "string", "", "the reflector's model ('': no reflector)"),
        Option("proposer_model", "string", "", "the proposer's model (default: the reflector's)"),
    ),
)  # fmt: skip

TOOL_ARGUMENTS = OptionTable(
    "integer arguments of the history tools (coco-sql history -n, --depth)",
    (
        Option("n", "integer", None, "how many rows", low=1, high=100_000),
        Option("depth", "integer", 10, "get_lineage: how many ancestors", low=1, high=100_000),
    ),
)  # fmt: skip

TABLES: Mapping[str, OptionTable] = {
    "coco_task spec": AIFO_TASK_OPTIONS,
    "coco_evolve": RUN_OPTIONS,
    "coco_evolve models": AI_OPTIONS,
    "agent mutator": AGENT_SETTINGS,
    "prompt_only mutator": PROMPT_ONLY_SETTINGS,
    "history tools": TOOL_ARGUMENTS,
}
"""The tables of coco-sql's own, by the name a help command shows them under; `tables()` adds the kinds'."""


def kind_task_options() -> dict[str, OptionTable]:
    """kind -> coco_task's options of a task of that kind beyond `TASK_OPTIONS` (`KindPlugin.task_options`),
    for every kind that has some: the built-ins, then the installed ones."""
    from coco_sql.plugins import kind, kind_names

    return {name: table for name in kind_names() if (table := kind(name).task_options) is not None}


def offline_settings() -> OptionTable:
    """The offline mutator's settings, composed from the kinds (`KindPlugin.offline_settings`, typed
    dataclasses of `setting` fields): those every kind takes first, then each kind's own, its doc saying whose.
    A run's `mutator_settings` are checked against this table (a kind refuses another kind's setting)."""
    from coco_sql.plugins import kind, kind_names

    per_kind = {name: settings_table(kind(name).offline_settings, name) for name in kind_names()}
    shared = [o for o in next(iter(per_kind.values())) if all(o.name in t.names for t in per_kind.values())]
    composed = {o.name: o for o in shared}
    for name, table in per_kind.items():
        for option in table:
            if option.name not in composed:
                composed[option.name] = replace(option, doc=f"{option.doc} ({name} tasks only)")
    return OptionTable("mutator_settings of the offline mutator", tuple(composed.values()))


def tables() -> dict[str, OptionTable]:
    """Every table, by the name a help command shows it under: coco-sql's own (`TABLES`), each kind's own
    coco_task options ('coco_task <kind>') and the offline mutator's settings, composed from the kinds."""
    kinds = {f"coco_task {name}": table for name, table in kind_task_options().items()}
    return {"coco_task": TASK_OPTIONS, **kinds, **TABLES, "offline mutator": offline_settings()}
