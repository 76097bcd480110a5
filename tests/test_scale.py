"""A warehouse-sized task runs: a 20,000-row lockpicking pool through the seed evaluation and one whole iteration
(InfoGain targeting, screening, drafts, evaluation, commit), in a child process under a 6 GiB address-space cap.

The dense N×N kernel this replaced needed 2 × 3.2 GB at this size, and its `A @ A.T` crashed OpenBLAS from
16,000 rows; either regression fails here with the child's signal or MemoryError, not by taking the runner down.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_a_20000_row_task_finishes_its_first_iteration_under_a_memory_cap(tmp_path: Path) -> None:
    pack = tmp_path / "lockpicking_20k"
    (pack / "data").mkdir(parents=True)
    (pack / "seed.sql").write_text((ROOT / "tasks" / "lockpicking6" / "seed.sql").read_text())
    toml = (ROOT / "tasks" / "lockpicking6" / "task.toml").read_text()
    (pack / "task.toml").write_text(toml.replace('name = "lockpicking6"', 'name = "lockpicking_20k"', 1))
    script = textwrap.dedent(
        f"""
        import importlib.util, json, resource
        from pathlib import Path
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
        spec = importlib.util.spec_from_file_location("gen", {str(ROOT / "scripts" / "make_lockpicking6.py")!r})
        gen = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(gen)
        gen.write(Path({str(pack / "data" / "pool.csv")!r}), "lp", 5, 20_000, gen.POOL_SEED)
        gen.write(Path({str(pack / "data" / "test.csv")!r}), "lt", 4, 200, gen.TEST_SEED)
        from coco_sql import api
        summary = api.evolve({str(pack)!r}, db={str(tmp_path / "scale.duckdb")!r}, budget=1, options={{"seed": 1}})
        print(json.dumps({{"iterations": summary.iterations, "val": summary.champion_val_score}}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stderr[-3000:]}"
    assert '"iterations": 1' in done.stdout.splitlines()[-1]
