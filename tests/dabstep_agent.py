"""Running specs on the DABStep pack with the scripted data agent (tests/agent_model.py), for the data-agent tests.

`Harness` holds one `FakeEndpoint` (a real local HTTP server), an `AiRuntime` routed to it through coco_sql's
OpenAI-compatible client, and the pack's tables; `run` answers questions with a spec in the real SQL sandbox and
scores each answer with the DABStep scorer, outside the run (the run never sees the expected answer).
`small_dabstep` copies the pack with nine questions, for whole runs that must stay short.
"""

from __future__ import annotations

import csv
import re
import shutil
import tomllib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from coco_sql.languages.agent_spec.pack import Question, TaskTables, load_questions, load_tables
from coco_sql.languages.agent_spec.runtime import AgentRun, RunLimits, run_question
from coco_sql.languages.agent_spec.scoring import score
from coco_sql.languages.agent_spec.spec import AgentSpec
from coco_sql.languages.agent_spec.tools import ToolBox
from coco_sql.llm import AiCache, AiConfig, EndpointConfig
from coco_sql.llm.runtime import AiRuntime
from coco_sql.tasks.splits import partition_ids
from tests.agent_model import DataAgentModel
from tests.llm_double import FakeEndpoint, ScriptFn

PACK = Path(__file__).resolve().parents[1] / "tasks" / "dabstep"
CONFIG = tomllib.loads((PACK / "task.toml").read_text())
MODEL = "fake/data-agent"
RULES = (
    "The fee of a rule for a transaction is fee = fixed_amount + rate * transaction_value / 10000.",
    "If a field is set to null it means that it applies to all possible values of that field.",
    "An empty list in a list field (account_type, aci, merchant_category_code) means the rule applies to all "
    "values of that field.",
)


@cache
def pack_tables() -> TaskTables:
    return load_tables(
        {name: PACK / path for name, path in CONFIG["agent_spec"]["tables"].items()},
        {name: (PACK / path).read_text() for name, path in CONFIG["agent_spec"]["documents"].items()},
    )


def questions() -> list[Question]:
    return load_questions(PACK / CONFIG["data"]["pool"])


def splits(rows: Sequence[Question]) -> dict[str, list[str]]:
    """The task's partition (seed, fractions of task.toml), as the loader makes it."""
    s = CONFIG["splits"]
    return partition_ids([q.id for q in rows], s["seed"], s["train_fraction"], s["test_fraction"])


def training_sample(per_template: int, templates: Sequence[str]) -> list[Question]:
    """The first `per_template` training questions (by id) of each template, in template order."""
    rows = questions()
    train = set(splits(rows)["train"])
    picked = []
    for template in templates:
        mine = sorted(
            (q for q in rows if q.id in train and q.extra["template"] == template), key=lambda q: int(q.id)
        )
        picked += mine[:per_template]
    return picked


@dataclass(frozen=True)
class Scored:
    question: Question
    run: AgentRun
    score: float


@dataclass
class Harness:
    endpoint: FakeEndpoint
    model: DataAgentModel
    runtime: AiRuntime
    tables: TaskTables

    def run(self, spec: AgentSpec, rows: Sequence[Question], limits: RunLimits | None = None) -> list[Scored]:
        scored = []
        with ToolBox(spec, self.tables.rows, self.tables.schemas) as toolbox:
            for q in rows:
                run = run_question(spec, q.id, q.question, q.guidelines, runtime=self.runtime, toolbox=toolbox,
                                   model=MODEL, limits=limits)  # fmt: skip
                scored.append(Scored(q, run, score(run.answer, q.answer, q.guidelines)))
        return scored

    def fresh_runtime(self, cache: AiCache) -> AiRuntime:
        """A new runtime over the same endpoint with `cache` (a resumed run loads its cache from the store)."""
        return AiRuntime(
            AiConfig(endpoints={"fake": EndpointConfig("openai", self.endpoint.base_url)}), cache=cache
        )


@contextmanager
def harness(
    tables: TaskTables | None = None, script: ScriptFn | None = None, latency_s: float = 0.0
) -> Iterator[Harness]:
    """A harness whose endpoint answers with `script` (default: a new `DataAgentModel`)."""
    model = DataAgentModel()
    with FakeEndpoint(script=script or model, full_tools=True, latency_s=latency_s) as endpoint:
        runtime = AiRuntime(AiConfig(endpoints={"fake": EndpointConfig("openai", endpoint.base_url)}))
        try:
            yield Harness(endpoint, model, runtime, tables or pack_tables())
        finally:
            runtime.close()


def total(scored: Sequence[Scored]) -> float:
    return sum(s.score for s in scored)


# -- a small dabstep pack --------------------------------------------------------------------------------------
#: Training questions, by template: the seed answers the scheme ranking (its query reads the manual's fee
#: section); the credit fee needs that section's rules; the account fee needs a rule no document states.
TRAIN = ("average_scenario_scheme", "credit_average_fee", "account_average_fee")
HELD_OUT = ("credit_average_fee", "average_scenario_scheme", "fee_ids_for_account_aci")
SMALL = "dabstep_small"  # the copy's task name: a procedure's coco_resume finds the pack by it (in ./tasks)


def small_dabstep(root: Path, model: str | None = None, max_drafts: int = 3) -> Path:
    """A copy of the dabstep pack named `SMALL` in `root`/tasks (where a run from `root` finds it by name) with nine
    questions (three per split: the training ones of `TRAIN`, held-out ones of `HELD_OUT`), the split seed chosen
    so that `TRAIN` is the training split, its ``[agent_spec] model`` set to `model` (None: the pack's) and at most
    `max_drafts` drafts per iteration."""
    pack = root / "tasks" / SMALL
    shutil.copytree(PACK, pack)
    rows = questions()
    picked: list[str] = []
    for templates in (TRAIN, HELD_OUT, HELD_OUT):
        for template in templates:
            picked.append(next(q.id for q in sorted(rows, key=lambda q: int(q.id))
                                if q.extra["template"] == template and q.id not in picked))  # fmt: skip
    config = tomllib.loads((PACK / "task.toml").read_text())
    s = config["splits"]
    seed = next(k for k in range(10_000)
                if partition_ids(picked, k, s["train_fraction"], s["test_fraction"])["train"] == sorted(picked[:3]))  # fmt: skip
    with (PACK / "data" / "questions.csv").open(newline="") as handle:
        reader = csv.DictReader(handle)
        columns, kept = reader.fieldnames, [row for row in reader if row["id"] in set(picked)]
    with (pack / "data" / "questions.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, columns)  # type: ignore[arg-type]
        writer.writeheader()
        writer.writerows(kept)
    text = (pack / "task.toml").read_text().replace('name = "dabstep"', f'name = "{SMALL}"', 1)
    text = text.replace(f"seed = {s['seed']}\n", f"seed = {seed}\n", 1)
    text = re.sub(r"^max_drafts = \d+", f"max_drafts = {max_drafts}", text, count=1, flags=re.MULTILINE)
    if model is not None:
        text = re.sub(r'^model = "[^"]*"', f'model = "{model}"', text, count=1, flags=re.MULTILINE)
    (pack / "task.toml").write_text(text)
    assert len(kept) == 9
    return pack
