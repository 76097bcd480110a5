"""A data agent evolved from SQL: `CALL coco_evolve` on the dabstep pack in DuckDB (a `coco_sql.connect`
connection), with the scripted data agent (tests/agent_model.py) behind a real local HTTP server as the
OpenAI-compatible endpoint, names the completion model in its options and holds what the same run through
`api.evolve` holds: the same programs, scores and row traces."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

import coco_sql
from coco_sql import api
from coco_sql.llm import AiConfig, EndpointConfig
from tests.agent_model import DataAgentModel
from tests.dabstep_agent import PACK
from tests.llm_double import FakeEndpoint


def _rows(db: Path) -> tuple[list[tuple], list[tuple]]:
    with duckdb.connect(str(db), read_only=True) as con:
        programs = con.execute("SELECT program_id, parent_id, code FROM programs ORDER BY 1").fetchall()
        scores = con.execute(
            "SELECT program_id, split, score FROM program_scores ORDER BY program_id, split"
        ).fetchall()
    return programs, scores


@pytest.mark.slow
def test_call_coco_evolve_on_a_data_agent_holds_what_the_api_run_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    called, direct = tmp_path / "called.duckdb", tmp_path / "direct.duckdb"
    with FakeEndpoint(script=DataAgentModel(), full_tools=True) as endpoint:
        monkeypatch.setenv("OPENAI_BASE_URL", endpoint.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        con = coco_sql.connect(called)
        try:
            options = "{'seed': 1, 'completion_model': 'openai/data-agent'}"
            (summary,) = con.execute(f"CALL coco_evolve('{PACK}', 1, {options})").fetchall()
            progress = con.execute("SELECT phase FROM coco_progress WHERE run_id = 1").fetchone()
            traces = con.execute(
                "SELECT count(*) FROM evaluations WHERE program_id = '1-0' AND split = 'train' "
                "AND observation IS NOT NULL"
            ).fetchone()
        finally:
            con.close()
        ai = AiConfig(
            endpoints={"openai": EndpointConfig("openai", endpoint.base_url)},
            completion_model="openai/data-agent",
        )
        api.evolve(PACK, db=direct, budget=1, options={"seed": 1}, ai=ai)
    assert summary[1] == "dabstep" and summary[2] == 1 and progress == ("finished",)
    assert traces[0] > 0  # every training row's trace is stored as its observation
    assert _rows(called) == _rows(direct)
