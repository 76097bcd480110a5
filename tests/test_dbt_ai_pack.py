"""The dbt pack with an AI step (tasks/goemotions_dbt), through the evaluator, the dbt sandbox and the embedded
AI backend, as `coco-sql evolve` runs it:

- a project validated before any run (validation opens the train split's sandbox, which has no AI runtime yet)
  still scores its AI model on the training keys: the sandbox is replaced once the runtime is known (before, the
  mutator's drafts all failed with "ai_classify does not exist" and scored 0);
- the repair mutator's evidence on the seed's training keys points at the label set: the edit adding the labels
  the mart counts (ambiguous, neutral) is proposed, and it gains on the training keys.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from coco_sql.languages.dbt.project import DbtProject
from coco_sql.tasks import load_task

pytest.importorskip(
    "dbt.adapters.duckdb",
    reason="dbt is not installed: pip install 'coco-sql[dbt]' (dbt-core 1.11, dbt-duckdb 1.11)",
)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def evaluator() -> Iterator[object]:
    from coco_sql.evaluate.evaluator import Evaluator
    from coco_sql.llm import AiConfig
    from coco_sql.llm.runtime import AiRuntime

    runtime = AiRuntime(AiConfig.from_environment(), None)
    judge = Evaluator(load_task("goemotions_dbt"), splits=("train",), ai=runtime)
    yield judge
    judge.close()
    runtime.close()


def test_a_project_validated_first_still_runs_its_ai_model_on_training_keys(evaluator) -> None:  # type: ignore[no-untyped-def]
    seed = evaluator.task.seed_program
    evaluator.check(seed)  # the train sandbox starts here, before the evaluator hands over the AI runtime
    outcome = evaluator.evaluate(seed, "train")
    assert outcome.error is None
    assert 0.05 < outcome.score < 0.9  # the seed: two of four labels and a filter that loses comments
    whole = [
        s for i, s in zip(outcome.ids, outcome.scores, strict=True) if ":" in i and not i.startswith("test:")
    ]
    assert sum(1 for s in whole if s == 1.0) < 0.5 * len(whole)  # most threads have a column wrong
    assert outcome.usage is not None and outcome.usage.model_calls > 0  # the AI calls are metered


def test_the_evidence_points_at_the_missing_labels_and_their_edit_gains(evaluator) -> None:  # type: ignore[no-untyped-def]
    from coco_sql.languages.dbt.edits import hypotheses
    from coco_sql.languages.dbt.evidence import Evidence
    from coco_sql.languages.dbt.validate import validate_project

    code = evaluator.task.seed_program
    seed = evaluator.evaluate(code, "train")
    evidence = Evidence.of(list(seed.ids), list(seed.outputs), list(seed.expected))
    assert {"n_ambiguous", "n_neutral"} <= set(evidence.columns)
    edits = hypotheses(
        DbtProject.from_text(code),
        validate_project(code, evaluator.task.kind_data.spec),
        evidence,
        "snowflake",
    )
    labels = [e for e in edits if "label set" in e.approach]
    assert [e.approach for e in labels] == [
        "add labels ambiguous, neutral to AI_CLASSIFY of stg_comments.sentiment (label set)"
    ]
    assert edits[0] is labels[0]  # weighed above dropping the filter
    staging = DbtProject.from_text(labels[0].code).files["models/staging/stg_comments.sql"]
    assert "['positive', 'negative', 'ambiguous', 'neutral']" in staging
    assert (
        evaluator.evaluate(labels[0].code, "train").score > seed.score + 0.02
    )  # per-column credit: 0.802 -> 0.828
