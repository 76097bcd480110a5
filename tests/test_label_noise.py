"""Likely label errors (issue 38, item 3): rows whose neighbours hold another label and that no program solves
are flagged, stored in `label_errors`, shown in the report with their text, and never used as few-shot
examples or counted by a guard. Real embedded model, real DuckDB, a real run."""

from __future__ import annotations

import re

import numpy as np
import pytest
from topics_setting import topics_pack

from coco_sql import api
from coco_sql.engines.duckdb.store import DuckDBStore
from coco_sql.languages.sql.mutate.ai_edits import TrainingRow, TrainingView, ai_edits
from coco_sql.languages.sql.mutate.ai_pipeline import with_suspects
from coco_sql.report.html import render
from coco_sql.report.page import build
from coco_sql.search.label_noise import likely_errors


def _clusters(per: int, labels: list[str], seed: int = 0) -> tuple[np.ndarray, list[tuple[str, ...]]]:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(len(labels), 16)) * 4
    x = np.vstack([centres[k] + rng.normal(size=(per, 16)) for k in range(len(labels))])
    return x / np.linalg.norm(x, axis=1, keepdims=True), [(label,) for label in labels for _ in range(per)]


def test_a_flipped_label_among_another_labels_rows_is_flagged_only_when_no_program_solves_it() -> None:
    vectors, golds = _clusters(15, ["a", "b", "c"])
    planted = {3: ("b",), 20: ("c",), 40: ("a",)}
    noisy = [planted.get(i, g) for i, g in enumerate(golds)]
    unsolved = [i in planted or i % 7 == 0 for i in range(len(golds))]  # some correct rows are hard too
    found = likely_errors(noisy, vectors, unsolved)
    assert [s.index for s in found] == sorted(planted)
    assert [s.neighbours_label for s in found] == [golds[i][0] for i in sorted(planted)]
    solved = [i not in (3,) and u for i, u in enumerate(unsolved)]  # a program answers row 3 as labelled
    assert 3 not in {s.index for s in likely_errors(noisy, vectors, solved)}


def test_suspects_are_never_offered_as_few_shot_examples() -> None:
    vectors, golds = _clusters(12, ["a", "b"], seed=1)
    planted = {2, 17}
    rows = tuple(
        TrainingRow(
            str(i),
            f"text {i}",
            (("b",) if golds[i] == ("a",) else ("a",)) if i in planted else golds[i],
            golds[i],  # what a program predicts: the true label, so it never solves a planted row
        )
        for i in range(len(golds))
    )
    view = with_suspects(TrainingView(rows, "text", vectors={f"text {i}": v for i, v in enumerate(vectors)}))
    assert view.suspects == {"2", "17"}
    import sqlglot

    query = sqlglot.parse_one(
        "SELECT id, AI_CLASSIFY(text, ['a', 'b']):labels[0]::string AS label FROM input", read="snowflake"
    )
    every = next(
        e for e in ai_edits(query, {0: view}, [], multi_label=False) if "every training row" in e.approach
    )
    child = every.apply(query).sql(dialect="snowflake")
    assert "'text 2'" not in child and "'text 17'" not in child and "'text 3'" in child


@pytest.mark.slow
def test_a_run_flags_planted_label_errors_stores_and_reports_them(tmp_path) -> None:
    pack, truth = topics_pack(tmp_path / "packs", per_topic=30, planted=10)
    db = tmp_path / "topics.duckdb"
    # budget 1: the seed and the search's own first child. From the second iteration on the plain linear head
    # is a child (`plain_heads`), and out of fold it learns these systematic flips (topic -> next topic) from
    # the other flipped rows: it "solves" 4 of the 10, which then are not flagged (no program may solve a flag)
    summary = api.evolve(str(pack), db=str(db), budget=1, options={"seed": 1})
    with DuckDBStore(db) as store:
        flagged = store.query(
            "SELECT instance_id, text, label FROM label_errors WHERE run_id = ?", [summary.run_id]
        )
        codes = [p.code for p in store.programs(summary.run_id)]
        html = render(build(store, summary.run_id))
    hits = set(flagged["instance_id"]) & set(truth)
    assert len(hits) >= 8, (sorted(flagged["instance_id"]), sorted(truth))
    assert len(flagged) <= len(truth) + 3  # few correct rows among them
    section = html[html.index('id="label-errors"') : html.index('id="guards"')]
    texts = dict(zip(flagged["instance_id"], flagged["text"], strict=True))
    for instance in hits:
        assert texts[instance] in section or re.sub("'", "&#39;", texts[instance]) in section
    for code in codes:  # never a few-shot example in any program of the run
        for instance in truth:
            assert f"'input': '{texts.get(instance, '@@')}'" not in code
