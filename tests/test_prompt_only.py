"""The `prompt_only` baseline on an AI_CLASSIFY task (issue 38, item 5): it edits only what Cortex builds the
call's prompt from (examples, label descriptions, output_mode), never the SQL around the call, never a second
AI call; a seed fixes its run; `--mutator prompt_only` and `{'mutator': 'prompt_only'}` name it. (Its AI_COMPLETE
side, models and prompt text, is tested on the docs' specification in `test_aifo.py`.)"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from pack_copies import small_pack
from test_aifo import outside_ai_calls

from coco_sql.engine.registry import MUTATORS, mutator_spec
from coco_sql.errors import ConfigError
from tests.conftest import run_cli


def run(pack: Path, db: Path) -> list[tuple[str, str, str]]:
    result = run_cli(
        "evolve", pack, "--db", db, "--budget", "3", "--seed", "2", "--mutator", "prompt_only", "--quiet",
        cwd=pack.parent,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT program_id, code, approach FROM programs ORDER BY program_id").fetchall()


@pytest.mark.slow
def test_prompt_only_edits_the_classify_calls_arguments_only_and_a_seed_fixes_its_run(tmp_path: Path) -> None:
    pack = small_pack(tmp_path, "hotpotqa_type", 40, 10)
    first = run(pack, tmp_path / "a.duckdb")
    assert first == run(pack, tmp_path / "b.duckdb")  # the same seed, the same programs
    seed = first[0][1]
    for _, code, approach in first[1:]:
        assert outside_ai_calls(code) == outside_ai_calls(seed), approach
        assert code.count("AI_CLASSIFY(") == 1 and "AI_SIMILARITY" not in code and "AI_EMBED" not in code
        assert approach.split(":")[0] in {"few_shot", "prune_examples", "shrink_examples", "describe_label"}


def test_it_is_registered_with_its_own_settings_and_refuses_bad_ones() -> None:
    spec = mutator_spec("prompt_only")
    assert "prompt_only" in MUTATORS and spec.settings({"models": ["a", "b"]})["models"] == ["a", "b"]
    with pytest.raises(ConfigError, match="setting 'models' must be list"):
        spec.settings({"models": "claude-haiku-4-5"})
    with pytest.raises(ConfigError, match="has no setting 'probe'"):
        spec.settings({"probe": False})


def test_a_kind_without_it_says_so_in_one_line(tmp_path: Path) -> None:
    pack = small_pack(tmp_path, "tsp_construct", 6, 2)
    result = run_cli("evolve", pack, "--db", tmp_path / "p.duckdb", "--budget", "1", "--mutator", "prompt_only",
                     cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        == "coco-sql: error: the prompt_only mutator has no operators for python programs"
    )
