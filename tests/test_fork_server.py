"""Worker templates (`sandbox.fork_server`): a forked worker keeps every promise a worker started from scratch
keeps, and where no template can be had the worker starts from scratch and the template says why."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from coco_sql.child import ChildDied
from coco_sql.errors import EvaluationMemoryError
from coco_sql.messages import SQL_WORKER
from coco_sql.sandbox.database import WORKER_SETTINGS, Sandbox, SandboxLimits
from coco_sql.sandbox.fork_server import ForkedProcess, WorkerTemplate, template
from coco_sql.sandbox.supervisor import handshake
from coco_sql.sandbox.table_frames import table_bytes

ROWS = pd.DataFrame({"id": [f"r{i}" for i in range(50)], "x": list(range(50))})
INIT = {
    "type": "init",
    "tables": ["input"],
    "memory_bytes": 1280 * 2**20,
    "duckdb_memory_limit": "960MB",
    "with_ai": False,
}


def started(tpl: WorkerTemplate):  # type: ignore[no-untyped-def]
    worker = tpl.start(SQL_WORKER)
    handshake(worker, INIT, "the sandbox process", blobs=[table_bytes(ROWS)])
    return worker


def test_a_sandbox_forks_its_worker_from_the_processs_template_and_the_fork_holds_only_its_own_descriptors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tpl = template("coco_sql.sandbox.worker", (), WORKER_SETTINGS)
    before = tpl.forks
    with Sandbox(ROWS) as first, Sandbox(ROWS) as second:
        assert first.run("SELECT sum(x) FROM input", 10.0).rows == [(1225,)]
        assert second.run("SELECT count(*) FROM input", 10.0).rows == [(50,)]
        pids = [first.worker_pid, second.worker_pid]
        descriptors = [
            {int(fd.name): os.readlink(fd) for fd in Path(f"/proc/{p}/fd").iterdir()} for p in pids
        ]
        folders = [os.readlink(f"/proc/{p}/cwd") for p in pids]
        parents = [int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1]) for p in pids]
    assert tpl.forks == before + 2 and tpl.unavailable is None
    assert parents[0] == parents[1] != os.getpid()  # both forked by the template
    assert folders[0] != folders[1]  # each in its own folder
    for fds in descriptors:
        assert not any(target.startswith("socket:") for target in fds.values()), fds  # not the template's
        assert sorted(fd for fd, target in fds.items() if target.startswith("pipe:")) == [3, 4], fds
        assert fds[2].endswith(".stderr"), fds


def test_a_fork_reports_how_it_ended_and_its_peak_memory() -> None:
    tpl = WorkerTemplate("coco_sql.sandbox.worker", settings=WORKER_SETTINGS)
    try:
        worker = started(tpl)
        assert isinstance(worker.process, ForkedProcess)
        assert worker.alive()
        os.kill(worker.pid, signal.SIGKILL)
        with pytest.raises(ChildDied, match="killed by SIGKILL"):
            worker.send({"type": "run", "sql": "SELECT 1", "deadline_s": 5.0})
            worker.receive(until=None)
        worker.stop()
        calm = started(tpl)
        calm.stop()  # closing its pipes ends it: exit status 0, and the template measured it
        assert calm.process.reaped() == 0
        assert calm.peak_rss_bytes is not None and calm.peak_rss_bytes > 20 * 2**20
        assert not Path(calm.folder).exists() and not Path(calm.stderr_path).exists()
    finally:
        tpl.close()


def test_closing_a_template_ends_it_on_its_own_and_its_forks_live_on() -> None:
    tpl = WorkerTemplate("coco_sql.sandbox.worker", settings=WORKER_SETTINGS)
    worker = started(tpl)
    server = tpl._server
    assert server is not None
    tpl.close()
    # it saw the end of its socket and returned (a template that missed it is killed after a grace period: -9)
    assert server.process.reaped() == 0
    worker.send({"type": "run", "sql": "SELECT 41 + 1", "deadline_s": 5.0})
    assert worker.receive(until=None)["type"] == "result"
    worker.stop()
    assert worker.process.reaped() == -9  # its template is gone: reported as killed, as an orphan is


def test_a_memory_bound_holds_in_a_fork_and_the_next_fork_is_clean() -> None:
    with Sandbox(ROWS, limits=SandboxLimits(memory_mb=400)) as box:
        with pytest.raises(EvaluationMemoryError):
            box.run("SELECT max(length(repeat('x', 100000000) || x::VARCHAR)) FROM range(20) t(x)", 20.0)
        assert box.run("SELECT count(*) FROM input", 10.0).rows == [(50,)]


def test_a_template_with_a_second_thread_refuses_to_fork_and_the_worker_starts_from_scratch() -> None:
    tpl = WorkerTemplate("coco_sql.sandbox.worker", ("tests.thread_at_import",), WORKER_SETTINGS)
    try:
        worker = started(tpl)
        assert (
            tpl.unavailable is not None and "refused to fork: the template runs 2 threads" in tpl.unavailable
        )
        assert tpl.forks == 0 and not isinstance(worker.process, ForkedProcess)
        argv = Path(f"/proc/{worker.pid}/cmdline").read_bytes().split(b"\0")
        assert argv[1:3] == [b"-m", b"coco_sql.sandbox.worker"]
        worker.stop()
    finally:
        tpl.close()


def test_a_template_that_died_is_started_again_and_its_orphans_count_as_killed() -> None:
    tpl = WorkerTemplate("coco_sql.sandbox.worker", settings=WORKER_SETTINGS)
    try:
        orphan = started(tpl)
        assert tpl._server is not None
        os.kill(tpl._server.pid, signal.SIGKILL)
        assert orphan.process.reaped() == -9  # the template cannot tell any more: reported as killed
        orphan.stop()
        again = started(tpl)
        assert isinstance(again.process, ForkedProcess) and tpl.unavailable is None and tpl.forks == 2
        again.stop()
    finally:
        tpl.close()


def test_a_process_that_used_a_sandbox_leaves_no_folder_of_its_template_behind(tmp_path: Path) -> None:
    code = (
        "import json, pandas as pd\n"
        "from coco_sql.sandbox.database import WORKER_SETTINGS, Sandbox\n"
        "from coco_sql.sandbox.fork_server import template\n"
        "with Sandbox(pd.DataFrame({'id': ['a'], 'x': [1]})) as box:\n"
        "    box.run('SELECT 1', 10.0)\n"
        "server = template('coco_sql.sandbox.worker', (), WORKER_SETTINGS)._server\n"
        "print(json.dumps([server.folder, server.stderr_path]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    folder, stderr = json.loads(done.stdout)
    assert Path(folder).name.startswith("coco-child-") and not Path(folder).exists()
    assert not Path(stderr).exists()


def test_a_dbt_sandbox_forks_its_worker_from_a_template_that_ran_dbt_once_and_kept_one_thread() -> None:
    pytest.importorskip("dbt.adapters.duckdb", reason="dbt is not installed: pip install 'coco-sql[dbt]'")
    from coco_sql.languages.dbt.project import DbtProject
    from coco_sql.languages.dbt.sandbox import WORKER_ENV, DbtSandbox
    from coco_sql.languages.dbt.validate import DbtSpec

    project = DbtProject.of({
        "dbt_project.yml": "name: shop\nconfig-version: 2\n",
        "models/sources.yml": "version: 2\nsources:\n  - name: shop\n    tables:\n      - name: orders\n",
        "models/big.sql": "select id, id * 10 as cents from {{ source('shop', 'orders') }} where id > 1\n",
    })  # fmt: skip
    tpl = template("coco_sql.languages.dbt.worker", (), WORKER_ENV)
    before = tpl.forks
    with DbtSandbox({"shop.orders": pd.DataFrame({"id": [1, 2, 3]})}) as box:
        result = box.run(box.validate(project, DbtSpec(), 60.0), ["big"], 60.0)
        assert result.models["big"].to_dict("list") == {"id": [2, 3], "cents": [20, 30]}
    # the template's warm-up run (`worker.preload`) left it able to fork: one thread, no fallback
    assert tpl.unavailable is None and tpl.forks == before + 1
    assert tpl._server is not None and len(os.listdir(f"/proc/{tpl._server.pid}/task")) == 1
