"""coco_task's options of a dbt task (`KindPlugin.task_options`): a dbt project over several tables, printed by
`CALL coco_help('coco_task dbt')` and checked by the kind's registrar (`registered`)."""

from __future__ import annotations

from coco_sql.options import MAX_TIMEOUT_S, SPLIT_SEED, Option, OptionTable
from coco_sql.plugin_loader import DEPLOY_DIALECT, SANDBOX_DIALECT

TASK_OPTIONS = OptionTable(
    "coco_task(name, NULL, {'kind': 'dbt', ...}): a dbt project over several tables",
    (
        Option("kind", "choice", None, "required: 'dbt'", choices=("dbt",), nullable=True, example="'dbt'"),
        Option("sources", "object", None, "required: each source table, 'source.table' as the models' "
               "source('source', 'table') reads it -> a table name or one SELECT query", nullable=True,
               example="{'shop.customers': 'customers', 'shop.orders': 'SELECT * FROM orders'}"),
        Option("targets", "object", None, "required: each scored model -> {'expected': a table or query, "
               "'key': its primary key, 'columns': the compared columns (default: all but the key), "
               "'tolerance': {column: abs_tol}, 'key_of': 'source.table.column' (default: entity)}",
               nullable=True, example="{'customer_totals': {'expected': 'expected_totals', 'key': 'customer_id'}}"),
        Option("seed_program", "string", None, "required: the dbt project to start from, its files under "
               "'-- file: PATH' lines (dbt_project.yml, models/**/*.sql and *.yml, macros/*.sql)",
               nullable=True, example="'-- file: dbt_project.yml (a newline) name: shop ...'"),
        Option("entity", "string", None, "required: the 'source.table.column' whose values are split into "
               "train, val and test", nullable=True, example="'shop.customers.id'"),
        Option("follow", "strings", [], "rows that go with the split of the rows they reference: "
               "'source.table.column -> source.table.column', parents listed first",
               example="['shop.orders.customer_id -> shop.customers.id']"),
        Option("allowed_functions", "strings", [], "functions the models may use on top of the base list "
               "(AI functions)", example="['AI_CLASSIFY']"),
        Option("dialect", "choice", DEPLOY_DIALECT, "the dialect the models are written in",
               choices=(DEPLOY_DIALECT, SANDBOX_DIALECT), example=f"'{SANDBOX_DIALECT}'"),
        Option("train_fraction", "number", 0.5, "the share of entities in train", low=0, high=1, open_low=True,
               open_high=True, example="0.6"),
        Option("test_fraction", "number", 0.2, "the share of entities in test", low=0, high=1, open_low=True,
               open_high=True, example="0.25"),
        SPLIT_SEED,
        Option("timeout_seconds", "number", 60.0, "one evaluation's deadline (every model, its data tests and "
               "the targets' rows), seconds", low=0, high=MAX_TIMEOUT_S, open_low=True, example="120"),
        Option("data_tests", "choice", "score", "the seed's data tests (unique, not_null, accepted_values, "
               "relationships on model columns) as scored instances, or not", choices=("score", "off"),
               example="'off'"),
        Option("description", "string", None, "one line (default: 'a dbt project over <sources>')",
               nullable=True, example="'Customer totals from orders'"),
    ),
)  # fmt: skip
