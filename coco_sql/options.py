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
(`CALL coco_help('coco_task')`, the README's tables, which a test compares with these rows). The machinery (`Option`, `OptionTable`, `setting`) is
`coco_sql.option_table`, re-exported here. This module imports nothing of coco-sql but it and the errors (and, in
the functions that compose the kinds' tables, the plug-in registry), so that every layer may read it; the choices of
registries (parent policies, mutators) are checked by their owners (`engine.RunConfig`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

# the machinery lives in `option_table`; every layer imports it from here, with the tables
from coco_sql.option_table import (  # noqa: F401
    MAX_AMOUNT,
    MAX_SEED,
    PACK_NAME,
    TASK_NAME,
    Option,
    OptionTable,
    as_object,
    check_task_name,
    setting,
    settings_table,
)
from coco_sql.plugin_loader import DEPLOY_DIALECT, SANDBOX_DIALECT

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
        Option("dialect", "choice", DEPLOY_DIALECT, "the dialect programs are written in",
               choices=(DEPLOY_DIALECT, SANDBOX_DIALECT), example=f"'{SANDBOX_DIALECT}'"),
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
    "history tools": TOOL_ARGUMENTS,
}
"""The tables of coco-sql's own, by the name a help command shows them under; `tables()` adds the kinds'."""


def kind_task_options() -> dict[str, OptionTable]:
    """kind -> coco_task's options of a task of that kind beyond `TASK_OPTIONS` (`KindPlugin.task_options`),
    for every kind that has some: the built-ins, then the installed ones."""
    from coco_sql.plugin_loader import kind_names, load_kind

    return {name: table for name in kind_names() if (table := load_kind(name).task_options) is not None}


def offline_settings() -> OptionTable:
    """The offline mutator's settings, composed from the kinds (`KindPlugin.offline_settings`, typed
    dataclasses of `setting` fields): those every kind takes first, then each kind's own, its doc saying whose.
    A run's `mutator_settings` are checked against this table (a kind refuses another kind's setting)."""
    from coco_sql.plugin_loader import kind_names, load_kind

    per_kind = {name: settings_table(load_kind(name).offline_settings, name) for name in kind_names()}
    shared = [o for o in next(iter(per_kind.values())) if all(o.name in t.names for t in per_kind.values())]
    composed = {o.name: o for o in shared}
    for name, table in per_kind.items():
        for option in table:
            if option.name not in composed:
                composed[option.name] = replace(option, doc=f"{option.doc} ({name} tasks only)")
    return OptionTable("mutator_settings of the offline mutator", tuple(composed.values()))


def kind_mutator_settings() -> dict[str, OptionTable]:
    """mutator -> the settings of a mutator a kind brings of its own (`KindPlugin.mutators` and
    `mutator_settings`; SQL: `prompt_only`), the first kind's that has it."""
    from coco_sql.plugin_loader import kind_names, load_kind

    found: dict[str, OptionTable] = {}
    for name in kind_names():
        for mutator, table in load_kind(name).mutator_settings.items():
            found.setdefault(mutator, table)
    return found


def tables() -> dict[str, OptionTable]:
    """Every table, by the name a help command shows it under: coco-sql's own (`TABLES`), each kind's own
    coco_task options ('coco_task <kind>'), the offline mutator's settings and those of the kinds' own
    mutators ('prompt_only mutator'), composed from the kinds."""
    kinds = {f"coco_task {name}": table for name, table in kind_task_options().items()}
    mutators = {f"{name} mutator": table for name, table in kind_mutator_settings().items()}
    return {"coco_task": TASK_OPTIONS, **kinds, **TABLES, "offline mutator": offline_settings(), **mutators}
