"""The sandbox's claims, each against the real thing: a DuckDB worker process with kernel limits.

- memory: a candidate that builds a multi-GB string or list ends as EvaluationMemoryError within its deadline plus
  2 s, and the worker's peak RSS stays under 1.5 GB (the coco-sql process does not grow either);
- deadline: a scalar call that DuckDB's interrupt cannot stop is killed, and the sandbox works again after;
- files: nothing under the working directory (DuckDB's `.tmp` included) or elsewhere is readable;
- credentials: the worker's environment holds none of the parent's variables, and it may write no file;
- plain data back: a child (sandbox worker or model host) that sends a crafted pickle, a 2 GB frame, a message
  of the wrong shape or of a foreign type fails the call with one line, is stopped, and nothing it sent runs
  here (the pickle's file never appears); its pipes are at descriptors 3 and 4, named nowhere in its argv.
"""

from __future__ import annotations

import importlib.util
import os
import resource
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest

from coco_sql.errors import EvaluationError, EvaluationMemoryError, EvaluationTimeout, ProviderUnavailable
from coco_sql.llm.providers.base import CompletionRequest, Deadline, Message
from coco_sql.llm.providers.local_llama import LocalLlamaProvider
from coco_sql.sandbox import Sandbox
from coco_sql.sandbox.lockdown import LockedDuckDB
from tests.conftest import run_cli

ROWS = pd.DataFrame({"id": [f"r{i}" for i in range(200)], "x": list(range(200))})
GB = 2**30


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    sandbox = Sandbox(ROWS)
    yield sandbox
    sandbox.close()


def own_peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


MULTI_GB = {
    "3 GB string": "SELECT id, length(repeat('x', 3000000000)) AS n FROM input",
    "3 GB list": "SELECT id, len(range(400000000)) AS n FROM input",
    "200 x 40 MB strings": "SELECT sum(length(repeat(id, 10000000))) AS n FROM input",
    "list of 50 MB strings": "SELECT len(list(repeat(id, 25000000))) AS n FROM input",
}


@pytest.mark.parametrize("sql", MULTI_GB.values(), ids=MULTI_GB.keys())
def test_a_multi_gb_value_is_a_clear_memory_error_within_the_deadline(box: Sandbox, sql: str) -> None:
    box.run("SELECT 1", 10.0)  # the worker is up
    parent_before = own_peak_rss()
    deadline = 10.0
    started = time.monotonic()
    with pytest.raises(EvaluationMemoryError, match="memory"):
        box.run(sql, deadline)
    assert time.monotonic() - started < deadline + 2.0
    assert box.worker_pid is None  # replaced on the next call
    assert box.last_worker_peak_rss is not None and box.last_worker_peak_rss < 1.5 * GB
    assert own_peak_rss() - parent_before < 0.2 * GB
    assert box.run("SELECT count(*) FROM input", 10.0).rows == [(200,)]


@pytest.mark.slow
def test_a_scalar_call_the_interrupt_cannot_stop_is_killed_in_time(box: Sandbox) -> None:
    """One regexp_replace over a 100 MB string runs about 10 s of CPU in one call, which DuckDB's interrupt cannot
    stop: the parent kills the worker once it has spent the deadline and the grace (2 s of CPU), well before."""
    box.run("SELECT 1", 10.0)
    restarts, pid = box.restarts, box.worker_pid
    started = time.monotonic()
    with pytest.raises(EvaluationTimeout, match="killed"):
        box.run("SELECT length(regexp_replace(repeat('a', 100000000), 'a', 'bb', 'g')) AS n", 1.0)
    assert time.monotonic() - started < 6.0  # 2 s of CPU, at up to three times that in wall time under load
    assert box.restarts == restarts + 1
    assert box.run("SELECT count(*) FROM input", 10.0).rows == [(200,)]  # a new worker
    assert box.worker_pid != pid


def test_an_endless_query_is_interrupted_and_the_worker_survives(box: Sandbox) -> None:
    box.run("SELECT 1", 10.0)
    restarts, pid = box.restarts, box.worker_pid
    with pytest.raises(EvaluationTimeout, match="stopped"):
        box.run("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r", 0.5)
    assert (box.restarts, box.worker_pid) == (restarts, pid)


def test_no_file_is_readable_from_the_sandbox(tmp_path: Path, box: Sandbox) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("id,answer\nv1,hidden\n")
    for reader in ("read_csv", "read_text", "read_duckdb"):
        with pytest.raises(EvaluationError, match=r"disabled by configuration|Catalog Error"):
            box.run(f"SELECT * FROM {reader}('{secret}')", 10.0)


def test_duckdbs_own_temp_directory_is_not_readable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DuckDB allows its temp directory (./.tmp) even with external access off, unless it is emptied first."""
    (tmp_path / ".tmp").mkdir()
    (tmp_path / ".tmp" / "secret.csv").write_text("id,answer\nv1,hidden\n")
    monkeypatch.chdir(tmp_path)
    database = LockedDuckDB(ROWS)
    try:
        for path in (".tmp/secret.csv", str(tmp_path / ".tmp" / "secret.csv")):
            with pytest.raises(EvaluationError, match="disabled by configuration"):
                database.run(f"SELECT * FROM read_csv('{path}')", 10.0)
    finally:
        database.close()


def test_a_probe_from_a_folder_with_a_tmp_secret_cannot_read_it(tmp_path: Path) -> None:
    (tmp_path / ".tmp").mkdir()
    (tmp_path / ".tmp" / "secret.csv").write_text("id,answer\nv1,hidden\n")
    for path in (".tmp/secret.csv", str(tmp_path / ".tmp" / "secret.csv")):
        done = run_cli(
            "env", "lockpicking6", "query", "--sql", f"SELECT * FROM read_csv('{path}')", cwd=tmp_path
        )
        assert done.returncode == 2 and "hidden" not in done.stdout + done.stderr
        assert done.stderr.count("\n") == 1 and "disabled by configuration" in done.stderr, done.stderr


def test_the_worker_has_no_credentials_and_may_write_no_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-leak")
    with Sandbox(ROWS) as sandbox:
        sandbox.run("SELECT 1", 10.0)
        pid = sandbox.worker_pid
        assert pid is not None and pid != os.getpid()
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        limits = Path(f"/proc/{pid}/limits").read_text()
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
        assert list(cwd.iterdir()) == []  # an empty folder of its own
    assert b"sk-do-not-leak" not in environ and b"OPENAI_API_KEY" not in environ
    file_size = next(line for line in limits.splitlines() if line.startswith("Max file size"))
    assert file_size.split()[3:5] == ["0", "0"], file_size
    data = next(line for line in limits.splitlines() if line.startswith("Max data size"))
    assert int(data.split()[3]) == sandbox.limits.memory_mb * 2**20, data
    assert not cwd.exists()  # removed on close


# ------------------------------------------------------------------------------- children that break protocol


BROKEN = ["pickle", "oversized", "malformed", "foreign"]


@pytest.mark.parametrize("mode", BROKEN + [f"{mode}-result" for mode in BROKEN])
def test_a_worker_that_breaks_its_protocol_fails_with_one_line_and_nothing_it_sent_runs(
    hostile_child: Callable[[str, Path], None], tmp_path: Path, mode: str
) -> None:
    """At the handshake, or as the answer to a query after a proper `ready`."""
    marker = tmp_path / "pwned"
    hostile_child(mode, marker)
    with Sandbox(ROWS) as sandbox, pytest.raises(EvaluationError) as error:
        sandbox.run("SELECT count(*) FROM input", 10.0)
    message = str(error.value)
    assert "\n" not in message and "the sandbox process" in message, message
    assert not marker.exists()
    if mode.endswith("-result"):
        assert message.endswith("(the sandbox process was stopped)") and sandbox.restarts == 1


@pytest.mark.parametrize("mode", BROKEN)
def test_a_model_host_that_breaks_its_protocol_is_unavailable_and_nothing_it_sent_runs(
    hostile_child: Callable[[str, Path], None], tmp_path: Path, mode: str
) -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (pip install 'coco-sql[local-llm]')")
    marker = tmp_path / "pwned"
    hostile_child(mode, marker)
    provider = LocalLlamaProvider(tmp_path / "model.gguf")
    request = CompletionRequest("smollm2", (Message("user", "Say hello."),), max_tokens=8)
    try:
        with pytest.raises(ProviderUnavailable, match=r"cannot load model\.gguf") as error:
            provider.complete(request, Deadline.after(20))
    finally:
        provider.close()
    assert "\n" not in str(error.value)
    assert not marker.exists()


def test_the_worker_finds_its_pipes_at_fixed_descriptors_named_nowhere(box: Sandbox) -> None:
    box.run("SELECT 1", 10.0)
    pid = box.worker_pid
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    fds = {int(fd.name): os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()}
    pipes = sorted(fd for fd, target in fds.items() if target.startswith("pipe:"))
    assert pipes == [3, 4], fds
    # forked from the worker's template, whose argv names the module it forks (`sandbox.fork_server`)
    assert argv[1:4] == [b"-m", b"coco_sql.sandbox.fork_server", b"coco_sql.sandbox.worker"]
    assert not any(arg.isdigit() for arg in argv[4:])
