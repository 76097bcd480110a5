"""The agent builder's page (docs/agents.md), run as it is written: the scripted demo model served in one
"terminal" (a process of its own, as a user starts it), the quick start in another, then the export."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from coco_sql.engines.duckdb.store import DuckDBStore
from tests.docs_blocks import Shell, blocks


@pytest.mark.slow
def test_the_agents_quick_start_runs_with_the_scripted_model(tmp_path: Path) -> None:
    server_block, run_block = blocks("agents.md", {"sh"})
    (server_line,) = [line for line in server_block.splitlines() if line.strip()]
    argv = shlex.split(server_line)
    assert argv[0] == "coco-sql"
    server = subprocess.Popen([sys.executable, "-m", "coco_sql.cli", *argv[1:]], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert server.stdout is not None
        first = server.stdout.readline()
        assert "a script, not a language model" in first, first + (
            server.stderr.read() if server.poll() else ""
        )
        shell = Shell(tmp_path)
        shell.run(run_block)
    finally:
        server.terminate()
        server.wait(timeout=30)
    with DuckDBStore(tmp_path / "runs" / "agent.duckdb", read_only=True) as store:
        scores = store.query(
            "SELECT program_id, split, score FROM program_scores WHERE split IN ('val', 'test')"
        )
    by = {(p, s): v for p, s, v in zip(scores.program_id, scores.split, scores.score, strict=True)}
    # the numbers the page states: the seed answers 5 of 40 validation questions, the champion 0.375 / 0.385
    assert by[("1-0", "val")] == pytest.approx(0.125) and by[("1-1", "val")] == pytest.approx(0.375)
    assert by[("1-1", "test")] == pytest.approx(0.385, abs=5e-4)
    script = (tmp_path / "runs" / "agent" / "create_agent.sql").read_text()
    assert "CREATE" in script and "AGENT" in script and "5. Understanding Payment Processing Fees" in script
