"""The tsp_construct pack: its data, its harness, its scorer, python pack loading, and a real evolution run."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.sparse.csgraph import minimum_spanning_tree
from scipy.spatial.distance import cdist

from coco_sql.engine import EvolutionLoop, RunConfig
from coco_sql.engines.duckdb.store import DuckDBStore
from coco_sql.errors import TaskError
from coco_sql.evaluate import Evaluator
from coco_sql.languages import language_for
from coco_sql.languages.kind import OfflineSettings
from coco_sql.languages.python import PythonLanguage
from coco_sql.languages.python.mutator import PythonOfflineMutator
from coco_sql.tasks import TaskPack, load_task
from coco_sql.tasks.scorers import BoundRatioScorer

REPO = Path(__file__).resolve().parents[1]
PACK = REPO / "tasks" / "tsp_construct"


@pytest.fixture(scope="module")
def tsp() -> TaskPack:
    return load_task("tsp_construct")


def points(task: TaskPack, split: str, instance_id: str) -> np.ndarray:
    inputs = task.split(split).inputs.set_index("id")
    return np.column_stack((inputs.loc[instance_id, "x"], inputs.loc[instance_id, "y"]))


# ------------------------------------------------------------------------------------------------ the data


def test_pack_splits_and_ids(tsp: TaskPack) -> None:
    assert (tsp.language, tsp.entry) == ("python", "select_next_node")
    assert PythonLanguage(tsp).spec.arity == 4
    assert (len(tsp.split("train")), len(tsp.split("val"))) == (32, 32)
    test_ids = tsp.split("test").ids
    for n in (50, 200, 500):
        ids = [i for i in test_ids if i.startswith(f"n{n:03d}_")]
        assert len(ids) == 64
        assert len(points(tsp, "test", ids[0])) == n
    assert all(re.fullmatch(r"n050_s\d{3}", i) for i in tsp.split("train").ids + tsp.split("val").ids)


def test_the_generator_reproduces_the_committed_data(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, str(REPO / "scripts" / "make_tsp_construct.py"), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    for name in ("pool.csv", "test.csv"):
        assert (tmp_path / name).read_bytes() == (PACK / "data" / name).read_bytes()


@pytest.mark.parametrize("instance_id", ["n050_000", "n200_031", "n500_063"])
def test_expected_value_is_the_minimum_spanning_tree(tsp: TaskPack, instance_id: str) -> None:
    xy = points(tsp, "test", instance_id)
    tree = minimum_spanning_tree(cdist(xy, xy)).sum()
    assert tsp.split("test").expected[instance_id] == pytest.approx(tree, abs=1e-6)


# --------------------------------------------------------------------------------------------- the harness


@pytest.fixture(scope="module")
def harness() -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile((PACK / "harness.py").read_text(), "harness.py", "exec"), namespace)
    return namespace


def square() -> dict[str, list[float]]:
    return {"x": [0.0, 1.0, 1.0, 0.0], "y": [0.0, 0.0, 1.0, 1.0]}


def test_harness_builds_a_closed_tour(harness: dict[str, Any]) -> None:
    calls: list[tuple[int, int, list[int]]] = []

    def nearest(current: int, destination: int, unvisited: np.ndarray, matrix: np.ndarray) -> int:
        calls.append((current, destination, unvisited.tolist()))
        return int(unvisited[np.argmin(matrix[current][unvisited])])

    tour = harness["run"](nearest, square())
    assert tour == [0, 1, 2, 3] and harness["measure"](tour, square()) == pytest.approx(4.0)
    # called while more than one node is left; the last one follows; destination is the start
    assert calls == [(0, 0, [1, 2, 3]), (1, 0, [2, 3])]


@pytest.mark.parametrize(
    "tour",
    [[0, 1, 2], [0, 1, 2, 2], [0, 1, 2, 4], [0, 1, 2, 3.0], [0, 1, 2, True], (0, 1, 2, 3), "0123", None],
)
def test_measure_refuses_what_is_not_a_tour_of_the_instance(harness: dict[str, Any], tour: object) -> None:
    """`measure` runs in coco-sql's process on whatever the sandbox sent: only a permutation of the nodes."""
    with pytest.raises(ValueError, match="not a permutation of the instance's 4 nodes"):
        harness["measure"](tour, square())
    assert harness["measure"]([2, 0, 3, 1], square()) == pytest.approx(2 + 2 * math.sqrt(2))


def test_harness_refuses_invalid_answers(harness: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="returned 0, which is not an unvisited node"):
        harness["run"](lambda c, d, u, m: 0, square())
    with pytest.raises(TypeError, match=r"returned 1\.0, not a node number"):
        harness["run"](lambda c, d, u, m: 1.0, square())

    def vandal(c: int, d: int, u: np.ndarray, m: np.ndarray) -> int:
        m.setflags(write=True)
        m[:] = 0.0
        return int(u[0])

    # the tour 0-1-2-3 is measured on the harness's own coordinates, not on the zeroed matrix
    assert harness["measure"](harness["run"](vandal, square()), square()) == pytest.approx(4.0)


def nearest_neighbour_length(xy: np.ndarray) -> float:
    """An independent nearest neighbour, as PACE's Greedy Construction: from node 0, back to node 0."""
    left = list(range(1, len(xy)))
    tour = [0]
    while left:
        here = xy[tour[-1]]
        nxt = min(left, key=lambda j: (math.dist(here, xy[j]), j))
        left.remove(nxt)
        tour.append(nxt)
    return sum(math.dist(xy[a], xy[b]) for a, b in zip(tour, tour[1:] + tour[:1], strict=True))


def test_the_seed_is_nearest_neighbour(tsp: TaskPack) -> None:
    evaluator = Evaluator(tsp, ("val",))
    try:
        outcome = evaluator.evaluate(tsp.seed_program, "val")
    finally:
        evaluator.close()
    assert outcome.ok
    for row in outcome.rows[:4]:
        assert float(row.output) == pytest.approx(
            nearest_neighbour_length(points(tsp, "val", row.instance_id))
        )
        assert row.score == pytest.approx(float(row.expected) / float(row.output))


def test_bound_ratio_scorer() -> None:
    scores = BoundRatioScorer().score([8.0, 4.0, 3.0, None, 0.0, -2.0, "nan", "x"], [4.0] * 8)
    assert scores == [0.5, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]


# ---------------------------------------------------------------------------------------- loading packs


@pytest.fixture
def pack_copy(tmp_path: Path) -> Path:
    root = tmp_path / "tsp_construct"
    shutil.copytree(PACK, root, ignore=shutil.ignore_patterns("test.csv"))
    text = (root / "task.toml").read_text().replace('test = "data/test.csv"\n', "")
    (root / "task.toml").write_text(
        text.replace("train_fraction = 0.5", "train_fraction = 0.5\ntest_fraction = 0.25")
    )
    return root


def test_fingerprint_covers_the_harness(pack_copy: Path) -> None:
    before = load_task(pack_copy).fingerprint()
    harness = pack_copy / "harness.py"
    harness.write_text(harness.read_text() + "\n# changed\n")
    assert load_task(pack_copy).fingerprint() != before


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (('entry = "select_next_node"\n', ""), r"key 'program\.entry': missing required key"),
        (('harness = "harness.py"', 'harness = "nope.py"'), r"key 'program\.harness': file not found"),
        (
            ('harness = "harness.py"\n', 'harness = "harness.py"\nwarmup = 3\n'),
            r"key 'program\.warmup': unknown key",
        ),
        (
            ('language = "python"\n', ""),
            r"key 'program\.entry': unknown key \(allowed: seed, allowed_functions",
        ),
    ],
)
def test_malformed_python_pack_gives_one_line(pack_copy: Path, change: tuple[str, str], message: str) -> None:
    toml = pack_copy / "task.toml"
    old, new = change
    assert old in toml.read_text()
    toml.write_text(toml.read_text().replace(old, new))
    with pytest.raises(TaskError, match=message) as error:
        load_task(pack_copy)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("file", "text", "message"),
    [
        ("task.toml", None, r"the seed program defines no top-level function 'choose'"),
        (
            "harness.py",
            "def go(entry, instance):\n    return 1\n",
            r"the harness must define run\(entry, instance\)",
        ),
        ("harness.py", "def run(entry, instance:\n", r"the harness is not Python: .* \(line 1\)"),
        ("seed.py", "def select_next_node(:\n", r"the seed program is not Python"),
    ],
)
def test_pack_code_that_does_not_fit_gives_one_line(
    pack_copy: Path, file: str, text: str | None, message: str
) -> None:
    """The loader reads the keys; the Python language checks the pack's code when it is built for a run."""
    path = pack_copy / file
    path.write_text(text if text is not None else path.read_text().replace('"select_next_node"', '"choose"'))
    task = load_task(pack_copy)
    with pytest.raises(TaskError, match=message) as error:
        language_for(task)
    assert "\n" not in str(error.value) and str(error.value).startswith("task 'tsp_construct': ")


# ------------------------------------------------------------------------------------------- a real run


@pytest.fixture
def small_test_split(tmp_path: Path) -> TaskPack:
    """The pack with 4 test instances per size instead of 64, so that the report takes a second."""
    root = tmp_path / "small" / "tsp_construct"
    shutil.copytree(PACK, root)
    lines = (root / "data" / "test.csv").read_text().splitlines(keepends=True)
    keep = [line for line in lines[1:] if re.match(r"n\d{3}_00[0-3],", line)]
    (root / "data" / "test.csv").write_text(lines[0] + "".join(keep))
    return load_task(root)


def test_evolution_run_improves_on_nearest_neighbour(small_test_split: TaskPack, tmp_path: Path) -> None:
    """The real loop, the DuckDB store and the Python offline mutator, for three iterations."""
    store = DuckDBStore(tmp_path / "x.duckdb")
    try:
        loop = EvolutionLoop(
            store, small_test_split, mutator=PythonOfflineMutator(OfflineSettings(max_drafts=6))
        )
        summary = loop.start(RunConfig(seed=1, budget=3))
        programs = store.programs(summary.run_id)
        report = store.query((PACK / "report.sql").read_text())
    finally:
        store.close()
    assert summary.iterations == 3 and len(programs) == 4
    assert {p.language for p in programs} == {"python"}
    assert all(p.valid for p in programs)
    assert summary.champion_val_score > summary.seed_val_score
    assert summary.champion_test_score is not None and summary.seed_test_score is not None
    assert summary.champion_test_score > summary.seed_test_score
    lengths = {(row.n, row.role): row.mean_tour_length for row in report.itertuples()}
    assert set(lengths) == {(n, role) for n in (50, 200, 500) for role in ("seed", "champion")}
    assert (report["instances"] == 4).all() and (report["missing"] == 0).all()
    for n in (50, 200, 500):  # shorter tours at every size, n = 200 and 500 never seen in the search
        assert lengths[n, "champion"] < lengths[n, "seed"]
