"""The README's "From SQL" section, run as it is written: the analyst's path from a table to a running export.

The code block is read from README.md and executed (so the doc cannot drift from what works): a 300-row table of
hotpotqa_type questions and a held-out table, `coco_task` with a seed that calls AI_CLASSIFY, `coco_evolve` in a
thread while a second connection reads `coco_progress`, the champion exported as a DuckDB view over the held-out
table, and the view's answers scored. It runs in a temporary folder holding a copy of the pack's two CSVs under
the same relative path, so that `runs/analyst.duckdb` lands there and not in the repository.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from coco_sql.options import TASK_OPTIONS

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"


def section(title: str, end: str) -> str:
    text = README.read_text()
    start = text.index(f"## {title}\n")
    return text[start : text.index(f"{end}\n", start)]


def test_the_from_sql_section_runs_word_for_word(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = re.findall(r"```python\n(.*?)```", section("From SQL", "### In Snowflake"), flags=re.S)
    assert len(blocks) == 1
    data = tmp_path / "tasks" / "hotpotqa_type" / "data"
    data.mkdir(parents=True)
    for name in ("pool.csv", "test.csv"):
        shutil.copy(REPO / "tasks" / "hotpotqa_type" / "data" / name, data / name)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "readme"}
    exec(compile(blocks[0], str(README), "exec"), namespace)  # the README's own code

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


def test_the_readme_table_of_coco_task_options_is_the_options_table() -> None:
    """The README's table of coco_task's options is `TASK_OPTIONS.rows()`, which `coco_help` prints."""
    text = section("From SQL", "### In Snowflake")
    table = text[text.index("| option | type | range | default | example | doc |") :].split("\n\n")[0]
    rows = [
        [cell.strip().strip("`").replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
        for line in table.splitlines()[2:]
    ]
    expected = [
        [r[k] for k in ("name", "type", "range", "default", "example", "doc")] for r in TASK_OPTIONS.rows()
    ]
    assert rows == expected
