"""AI-pipeline edits: literal round trips, mining by hand, and the offline mutator improving a real AI_CLASSIFY
pipeline on a small goemotions pack (real embedded model, real DuckDB)."""

from __future__ import annotations

from pathlib import Path

import sqlglot

from coco_sql.engine import iteration_rng
from coco_sql.evaluate import Evaluator
from coco_sql.languages.sql.mutate.ai_edits import (
    TrainingRow,
    TrainingView,
    ai_edits,
    classify_calls,
    confusions,
    guard_candidates,
    read_spec,
    to_node,
    to_python,
)
from coco_sql.languages.sql.mutate.offline import OfflineMutator
from coco_sql.mutate import MutationRequest, ProgramView
from coco_sql.reflect import DraftEnvironment
from coco_sql.tasks import load_task
from tests.test_ai_runs import small_goemotions

CALL = """SELECT id, AI_CLASSIFY(text, ['yes', {'label': 'no', 'description': 'a refusal'}],
                               {'output_mode': 'multi', 'examples': [{'input': 'sure', 'labels': ['yes']}]}) AS out
          FROM input"""


def rows(*items: tuple[str, str, str]) -> tuple[TrainingRow, ...]:
    return tuple(TrainingRow(f"r{i}", text, (gold,), (pred,)) for i, (text, gold, pred) in enumerate(items))


def test_literal_arguments_round_trip() -> None:
    query = sqlglot.parse_one(CALL, read="snowflake")
    spec = read_spec(classify_calls(query)[0])
    assert spec is not None
    assert spec.labels == ["yes", "no"]
    assert spec.config == {"output_mode": "multi", "examples": [{"input": "sure", "labels": ["yes"]}]}
    assert spec.example_inputs == {"sure"}
    assert to_python(to_node(spec.config)) == spec.config
    dynamic = sqlglot.parse_one("SELECT AI_CLASSIFY(text, labels_column) FROM input", read="snowflake")
    assert read_spec(classify_calls(dynamic)[0]) is None  # not literal: never edited


def test_guard_candidates_rank_by_gain_over_the_parent() -> None:
    view = rows(
        ("Which is older, A or B?", "comparison", "bridge"),
        ("Were X or Y born first?", "comparison", "bridge"),
        ("Is Z or W taller?", "comparison", "comparison"),
        ("Who directed the film in which she starred?", "bridge", "bridge"),
        ("What city or town hosts it?", "bridge", "bridge"),
    )
    found = guard_candidates(view, ["bridge", "comparison"], min_support=3)
    # ' or ' matches 4 rows: 'comparison' fixes two and breaks one that the parent had right: gain 1.
    assert found[0][:3] == (" or ", "comparison", 4)
    assert found[0][3] == 1.0
    assert all(
        label != "bridge" for pattern, label, _, _ in found if pattern == " or "
    )  # bridge gains nothing


def test_confusions_count_missed_labels() -> None:
    view = rows(("a", "x", "y"), ("b", "x", "y"), ("c", "y", "y"), ("d", "z", "x"))
    assert confusions(view) == [("x", "y", 2), ("z", "x", 1)]


def test_edits_cover_few_shot_descriptions_mode_and_guards() -> None:
    query = sqlglot.parse_one(CALL, read="snowflake")
    view = TrainingView(
        rows(
            ("sure thing", "yes", "no"),
            ("no way", "no", "yes"),
            ("never ever", "no", "yes"),
            ("never", "no", "yes"),
            ("never again", "no", "yes"),
        ),
        "text",
    )
    edits = ai_edits(query, {0: view}, targets=["r1"])
    operators = {e.operator for e in edits}
    assert {"few_shot", "output_mode", "keyword_guard"} <= operators
    child = next(e for e in edits if e.operator == "keyword_guard").apply(query)
    assert "ILIKE" in child.sql("snowflake") and "PARSE_JSON" in child.sql("snowflake")
    few = next(e for e in edits if e.operator == "few_shot" and "targeted" in e.description).apply(query)
    assert read_spec(classify_calls(few)[0]).example_inputs == {"sure", "no way"}


def test_offline_mutator_improves_a_real_ai_pipeline(tmp_path: Path) -> None:
    task = load_task(small_goemotions(tmp_path, pool_rows=90, test_rows=10))
    evaluator = Evaluator(task)
    env = DraftEnvironment(evaluator)
    parent = ProgramView("1-0", task.seed_program, 0.0)
    proposal = OfflineMutator(max_drafts=8).propose(MutationRequest(1, parent, env), iteration_rng(0, 1, 1))
    assert proposal.notes["cross_fitted"] and proposal.notes["drafts_tested"] >= 3
    assert proposal.notes["child_train_score"] > proposal.notes["parent_train_score"]
    assert evaluator.evaluate(proposal.code, "val").score > evaluator.evaluate(task.seed_program, "val").score
    evaluator.close()


def test_similarity_threshold_is_tuned_on_the_training_rows() -> None:
    from coco_sql.languages.sql.mutate.ai_edits import similarity_thresholds

    view = rows(
        ("a", "x", "y"),  # 0.9: guard fixes it (+1)
        ("b", "x", "y"),  # 0.8: +1
        ("c", "x", "x"),  # 0.7: already right (0)
        ("d", "y", "y"),  # 0.6: guard breaks it (-1)
        ("e", "x", "y"),  # 0.5: +1
    )
    similarity = {"r0": 0.9, "r1": 0.8, "r2": 0.7, "r3": 0.6, "r4": 0.5}
    # Cumulative gains from the top: 1, 2, 2, 1; the cut after three rows (support 3) gains 2.
    threshold, support, gain = similarity_thresholds(view, "x", similarity)
    assert (round(threshold, 6), support, gain) == (0.65, 3, 2.0)
    assert similarity_thresholds(view, "y", similarity) is None  # answering y nowhere gains


def test_examples_that_their_neighbours_contradict_can_be_pruned() -> None:
    query = sqlglot.parse_one(CALL, read="snowflake")  # one example: 'sure' -> yes
    view = TrainingView(rows(("sure", "yes", "no"), ("ok", "yes", "yes")), "text")
    prune = [e for e in ai_edits(query, {0: view}, targets=[]) if e.operator == "prune_examples"]
    assert len(prune) == 1 and "drop 1 examples" in prune[0].description
    assert read_spec(classify_calls(prune[0].apply(query))[0]).example_inputs == set()
    agreeing = TrainingView(rows(("sure", "yes", "yes")), "text")
    assert not [e for e in ai_edits(query, {0: agreeing}, targets=[]) if e.operator == "prune_examples"]
