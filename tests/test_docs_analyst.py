"""The analyst's page (docs/analyst.md), run as it is written: the path from a table to a running export.

Its Python block is executed (so the page cannot drift from what works): a 300-row table of
hotpotqa_type questions and a held-out table, `coco_task` with a seed that calls AI_CLASSIFY, `coco_evolve` in a
thread while a second connection reads `coco_progress`, the champion exported as a DuckDB view over the held-out
table, and the view's answers scored. Then its shell block writes the report and the Snowflake export of that
run. It runs in a temporary folder holding a copy of the pack's two CSVs under the same relative path, so that
`runs/analyst.duckdb` lands there and not in the repository.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.docs_blocks import DOCS, Shell, blocks

REPO = Path(__file__).resolve().parents[1]
PAGE = DOCS / "analyst.md"


@pytest.mark.slow  # the page's runs, word for word: ~55-70 s, the CI tier's longest test
def test_the_analyst_page_runs_word_for_word(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    python, shell = blocks("analyst.md", {"python"}), blocks("analyst.md", {"sh"})
    assert len(python) == 1 and len(shell) == 1
    data = tmp_path / "tasks" / "hotpotqa_type" / "data"
    data.mkdir(parents=True)
    for name in ("pool.csv", "test.csv"):
        shutil.copy(REPO / "tasks" / "hotpotqa_type" / "data" / name, data / name)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "docs"}
    exec(compile(python[0], str(PAGE), "exec"), namespace)  # the page's own code

    out = capsys.readouterr().out
    assert "option" in out and "timeout_seconds" in out  # coco_help('coco_task') printed its rows
    assert "300" in out and "150" in out  # the task: 300 rows, train 150, val 150, test 100
    # the second connection saw the run go: its progress rows while it ran (after the seed, each iteration)
    assert re.search(r"\('evolving', [0-2], 2, 0\.\d+, '\[", out), out[-3000:]
    summary = namespace["summary"]
    assert summary.iterations[0] == 2 and summary.stopped[0] is None  # type: ignore[attr-defined]
    assert summary.champion_val_score[0] > summary.seed_val_score[0]  # type: ignore[attr-defined]
    # the exported AI view, run on the user's held-out table, scores what the run's test scored
    assert namespace["accuracy"] == pytest.approx(summary.champion_test_score[0])  # type: ignore[attr-defined]
    con = namespace["con"]
    phase = con.execute("SELECT phase, iteration FROM coco_progress WHERE run_id = 1").fetchall()  # type: ignore[attr-defined]
    assert phase == [("finished", 2)]
    con.close()  # type: ignore[attr-defined]
    namespace["watch"].close()  # type: ignore[attr-defined]

    run = Shell(tmp_path)
    run.run(shell[0])  # the report and the Snowflake export of that run
    assert (tmp_path / "runs" / "report.html").read_text().count('<section class="lead"') == 1
    assert "CREATE OR REPLACE VIEW" in run.outputs[-1] and "AI_CLASSIFY" in run.outputs[-1]
