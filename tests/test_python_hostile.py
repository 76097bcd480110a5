"""Issue 25: hostile Python candidates, each through the validator and again with the validator bypassed.

Every route of the security pass, as a program:
- reflection that today's checks missed (`operator.attrgetter` with dunder paths, frames through a traceback,
  format strings reading attributes, `typing.get_type_hints` evaluating text, patching an imported class,
  `np.seterr`) is refused by the validator with one line;
- the same programs run in the sandbox without the validator achieve nothing:
  - writing a crafted pickle to every descriptor (coco-sql's pipe among them, once): the evaluation fails with
    one line, and the pickle, whose loading would create a file and read the test split, never loads;
  - rewriting the harness's `tour_length` through `f_back.f_globals`: the score is the honest one;
  - changing numpy's error state, `collections.Counter`, the harness's globals: later programs compute what
    they computed before;
- no test row reaches what `env show-draft` and the agent's `test_draft` return.
"""

from __future__ import annotations

import ast
import json
import pickle
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pack_copies import planted_python_pack

from coco_sql.errors import CandidateRejected, EvaluationError, EvaluationTimeout
from coco_sql.evaluate import Evaluator
from coco_sql.languages import Program
from coco_sql.languages.python import PythonLanguage, PythonRunner
from coco_sql.reflect.environment import DraftEnvironment
from coco_sql.tasks import TaskPack, load_task

SIGNATURE = "def select_next_node(current_node, destination_node, unvisited_nodes, distance_matrix):\n"
SEED = SIGNATURE.replace("def", "import numpy as np\n\n\ndef", 1) + (
    "    return unvisited_nodes[np.argmin(distance_matrix[current_node][unvisited_nodes])]\n"
)
FIRST_NODE = SIGNATURE + "    return unvisited_nodes[0]\n"

# The harness's scorer, replaced from inside the program: its caller's globals are the harness's.
SCORE_REWRITE = (
    "import operator\n\n\n"
    + SIGNATURE
    + """    try:
        raise ValueError("where am I")
    except ValueError as error:
        caller = operator.attrgetter("__traceback__.tb_frame.f_back")(error)
    caller.f_globals["tour_length"] = lambda xs, ys, tour: 1e-9
    return unvisited_nodes[0]
"""
)
NUMPY_STATE = "import numpy as np\nnp.seterr(all='raise')\n\n\n" + SEED
# Nearest neighbour by the largest exp(-1000 d): far nodes underflow to 0, which numpy ignores by default.
UNDERFLOWING = SEED.replace(
    "np.argmin(distance_matrix[current_node][unvisited_nodes])",
    "np.argmax(np.exp(-1000.0 * distance_matrix[current_node][unvisited_nodes]))",
)
# Picks the nearest node through collections.Counter; and a program that patches Counter for every later one.
COUNTER_USER = (
    "import collections\n\n\n"
    + SIGNATURE
    + """    counts = collections.Counter({int(n): float(distance_matrix[current_node][n]) for n in unvisited_nodes})
    return min(counts.most_common(), key=lambda pair: pair[1])[0]
"""
)
COUNTER_PATCH = (
    "from collections import Counter\n\nCounter.most_common = lambda self, n=None: [(max(self), 0.0)]\n\n\n"
    + FIRST_NODE
)
FORMAT_READ = "def main(instance):\n    return ('{0.__cla' + 'ss__}').format(instance)\n"
TYPE_HINTS = (
    "import typing\n\n\nclass Sneaky:\n    x: \"open('/etc/hostname').read()\"\n\n\n"
    "def main(instance):\n    return str(typing.get_type_hints(Sneaky))\n"
)


def pipe_writer(payload: bytes) -> str:
    """A program that reaches the real `os` through `operator.attrgetter` and writes `payload`, as one frame,
    to every descriptor it can: those named in its argv (where coco-sql's pipes were) and 3..31."""
    frame = len(payload).to_bytes(4, "big") + payload
    return f"""import operator


def os_globals():
    for cls in operator.attrgetter("__class__.__base__.__subclasses__")(())():
        if operator.attrgetter("__name__")(cls) == "_wrap_close":
            return operator.attrgetter("__init__.__globals__")(cls)


def main(instance):
    found = os_globals()
    for fd in [int(a) for a in found["sys"].argv if a.isdigit()] + list(range(3, 32)):
        try:
            found["write"](fd, {frame!r})
        except Exception:
            pass
    return 1.0
"""


def closer() -> str:
    """A program that closes every descriptor it has (its answer pipe among them) and never stops."""
    return (
        pipe_writer(b"").split("def main")[0]
        + """def main(instance):
    found = os_globals()
    for fd in range(3, 64):
        try:
            found["close"](fd)
        except Exception:
            pass
    while True:
        try:
            while True:
                pass
        except:
            pass
"""
    )


class Exploit:
    """Loading it runs `source` in the loader's process (a pickle's `__reduce__`)."""

    def __init__(self, source: str) -> None:
        self.source = source

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (eval, (self.source,))


def crafted_pickle(marker: Path, test_csv: Path) -> bytes:
    """Loaded, it creates `marker` and becomes a Python worker's answer (as coco-sql read them before issue 25)
    whose one failure's reason is the test split's file."""
    return pickle.dumps(
        Exploit(
            f"(open({str(marker)!r}, 'w').close(), "
            f"('result', [], [('row_000', open({str(test_csv)!r}).read())], 1.0, 1.0))[1]"
        )
    )


class Unchecked(PythonLanguage):
    """The Python language without its validator: what the sandbox must hold against by itself."""

    def validate(self, code: str) -> Program:
        return Program(self.name, code, code, ast.parse(code))


def bypass(code: str) -> Program:
    return Program("python", code, code, None)


@pytest.fixture(scope="module")
def tsp() -> TaskPack:
    return load_task("tsp_construct")


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> TaskPack:
    return load_task(planted_python_pack(tmp_path_factory.mktemp("packs")))


@pytest.fixture(scope="module")
def tsp_runner(tsp: TaskPack) -> Iterator[PythonRunner]:
    runner = PythonLanguage(tsp).runner(tsp.split("train"), None)
    yield runner
    runner.close()


# ------------------------------------------------------------------------------------------- the validator


@pytest.mark.parametrize(
    ("code", "fragment"),
    [
        (SCORE_REWRITE, "the attribute 'f_globals' is not allowed"),
        (
            "import operator\n" + SIGNATURE + "    return operator.attrgetter('tb_frame')(1)\n",
            "names 'tb_frame'",
        ),
        (pipe_writer(b"x"), "names '__class__'"),
        (NUMPY_STATE, "np.seterr is not allowed"),
        (COUNTER_PATCH, "assigning to 'Counter.most_common' is not allowed"),
        (FORMAT_READ, ".format is only allowed on a text literal"),
        (TYPE_HINTS, "typing.get_type_hints is not allowed"),
        ("import operator\n" + SIGNATURE + "    return operator.attrgetter(str(1))(1)\n", "only literal"),
        (
            "import operator\n" + SIGNATURE + "    get = operator.methodcaller\n    return 1\n",
            "called directly",
        ),
        (SIGNATURE + "    g = (x for x in [1])\n    return g.gi_frame\n", "attribute 'gi_frame'"),
        (SIGNATURE + "    return '{0.real}'.format(current_node)\n", "reads an attribute or item"),
    ],
)
def test_the_validator_refuses_each_route(tsp: TaskPack, planted: TaskPack, code: str, fragment: str) -> None:
    language = PythonLanguage(tsp if "def select_next_node" in code else planted)
    with pytest.raises(CandidateRejected) as rejection:
        language.validate(code)
    assert fragment in str(rejection.value) and "\n" not in str(rejection.value), rejection.value


# ----------------------------------------------------------------------------------- without the validator


def test_a_crafted_pickle_written_to_every_descriptor_never_loads(planted: TaskPack, tmp_path: Path) -> None:
    marker, test_csv = tmp_path / "pwned", planted.root / "data" / "test.csv"
    program = bypass(pipe_writer(crafted_pickle(marker, test_csv)))
    runner = PythonLanguage(planted).runner(planted.split("train"), None)
    try:
        with pytest.raises(EvaluationError) as error:
            runner.run(program, 20.0)
        message = str(error.value)
        assert "\n" not in message and "the program's process sent" in message, message
        assert "TESTSECRET" not in message
        assert not marker.exists()
        assert runner.run(bypass("def main(instance):\n    return 2.0\n"), 20.0).outputs[0][1] == 2.0
    finally:
        runner.close()


def test_a_program_that_closes_its_pipes_and_runs_on_is_killed_at_its_deadline(planted: TaskPack) -> None:
    runner = PythonLanguage(planted).runner(planted.split("train"), None)
    try:
        runner.run(bypass("def main(instance):\n    return 2.0\n"), 20.0)
        started = time.monotonic()
        with pytest.raises(EvaluationTimeout, match="deadline and was killed"):
            runner.run(bypass(closer()), 1.0)
        assert time.monotonic() - started < 1.0 + 2.0
        assert runner.run(bypass("def main(instance):\n    return 2.0\n"), 20.0).outputs[0][1] == 2.0
    finally:
        runner.close()


def test_a_program_cannot_rewrite_its_own_score(tsp: TaskPack, tsp_runner: PythonRunner) -> None:
    evaluator = Evaluator(tsp, ("train",))
    try:
        honest = evaluator.score_rows("train", tsp_runner.run(bypass(FIRST_NODE), 60.0).outputs)
        rewritten = evaluator.score_rows("train", tsp_runner.run(bypass(SCORE_REWRITE), 60.0).outputs)
        seed = evaluator.score_rows("train", tsp_runner.run(bypass(SEED), 60.0).outputs)
    finally:
        evaluator.close()
    assert honest.score < 0.5
    assert rewritten.score == honest.score and list(rewritten.outputs) == list(honest.outputs)
    assert seed.score == pytest.approx(0.69, abs=0.01)  # and the next program is not rewritten either


@pytest.mark.parametrize(
    ("poison", "probe"),
    [(NUMPY_STATE, UNDERFLOWING), (COUNTER_PATCH, COUNTER_USER), (SCORE_REWRITE, SEED)],
    ids=["np.seterr", "collections.Counter", "harness globals"],
)
def test_nothing_a_program_changes_reaches_the_next(
    tsp_runner: PythonRunner, poison: str, probe: str
) -> None:
    before = tsp_runner.run(bypass(probe), 60.0)
    tsp_runner.run(bypass(poison), 60.0)
    after = tsp_runner.run(bypass(probe), 60.0)
    assert len(before.outputs) == 32 and after.outputs == before.outputs and after.errors == before.errors


# -------------------------------------------------------------------------------------- the test split


@pytest.mark.parametrize("checked", [True, False], ids=["validator", "no validator"])
def test_no_test_row_reaches_show_draft_or_test_draft(
    planted: TaskPack, tmp_path: Path, checked: bool
) -> None:
    marker, test_csv = tmp_path / "pwned", planted.root / "data" / "test.csv"
    code = pipe_writer(crafted_pickle(marker, test_csv))
    language = PythonLanguage(planted) if checked else Unchecked(planted)
    evaluator = Evaluator(planted, ("train",), language=language)
    try:
        environment = DraftEnvironment(evaluator)
        shown = environment.show_draft(code)
        tested = environment.test_draft(code)
    finally:
        evaluator.close()
    seen = json.dumps(shown) + repr(tested.error) + repr(list(tested.outputs)) + repr(list(tested.errors))
    assert "TESTSECRET" not in seen and not marker.exists()
    assert shown["train_score"] == 0.0 and "\n" not in (shown["error"] or "")


def test_no_test_row_reaches_env_show_draft_on_the_command_line(
    planted: TaskPack, tmp_path: Path, cli
) -> None:  # type: ignore[no-untyped-def]
    marker, test_csv = tmp_path / "pwned", planted.root / "data" / "test.csv"
    program = tmp_path / "draft.py"
    program.write_text(pipe_writer(crafted_pickle(marker, test_csv)))
    done = cli("env", planted.root, "show-draft", "--program", program)
    assert "TESTSECRET" not in done.stdout + done.stderr and not marker.exists()
    assert "names '__class__'" in done.stdout + done.stderr
