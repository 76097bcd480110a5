"""Python programs: the validator, the sandbox's claims, the language seam and the offline operators.

The sandbox claims (sandbox.python_sandbox) are tested with programs that get past the validator and the
restricted builtins: they are built as `Program(...)` directly and walk `object.__subclasses__()` to the real
builtins, `__import__` and socket class. Each claim runs once per kernel layer alone (seccomp; namespaces with
chroot) and once under a control sandbox without kernel layers, where the same program must succeed: so every
test would fail if its layer stopped holding.
"""

from __future__ import annotations

import ast
import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from pack_copies import ECHO_HARNESS, OK_PROGRAM, planted_python_pack

from coco_sql.errors import (
    CandidateRejected,
    ConfigError,
    EvaluationError,
    EvaluationMemoryError,
    EvaluationTimeout,
)
from coco_sql.evaluate import Evaluator
from coco_sql.languages import Program, language_for
from coco_sql.languages.kind import OfflineSettings
from coco_sql.languages.python import ALLOWED_MODULES, PythonLanguage
from coco_sql.languages.python import ops as python_ops
from coco_sql.languages.python.mutator import PythonOfflineMutator
from coco_sql.mutate.base import MutationRequest
from coco_sql.reflect.context import ContextBundle, ProgramView
from coco_sql.reflect.environment import DraftEnvironment
from coco_sql.sandbox.python_sandbox import PythonSandbox, PythonSandboxLimits
from coco_sql.tasks import TaskPack, load_task

TSP = Path(__file__).resolve().parents[1] / "tasks" / "tsp_construct"

# What each layer configuration is: 'control' has no kernel layer, so an escaped program must get through.
LAYERS = {
    "seccomp": PythonSandboxLimits(namespaces=False),
    "namespaces": PythonSandboxLimits(seccomp=False),
    "control": PythonSandboxLimits(namespaces=False, seccomp=False),
}
# Gets the real builtins from any object: the escape a validator hole would allow.
ESCAPE = """
def _real_builtins():
    for cls in ().__class__.__base__.__subclasses__():
        if cls.__name__ == "_wrap_close":
            return cls.__init__.__globals__["__builtins__"]
    raise RuntimeError("no way out")

B = _real_builtins()
IMPORT = B["__import__"]

def attempt(action):
    try:
        return "ok: " + repr(action())[:60]
    except B["BaseException"] as error:
        return "refused: " + type(error).__name__
"""


def escaped(body: str) -> Program:
    """A program that never met the validator."""
    source = ESCAPE + body
    return Program("python", source, source, None)


# ------------------------------------------------------------------------------------ a pack with planted ids


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> TaskPack:
    """Pool ids row_000..row_011 (6 train, 6 val), test ids TESTSECRET_000..003; every label is >= 424242."""
    return load_task(planted_python_pack(tmp_path_factory.mktemp("packs")))


@pytest.fixture(scope="module")
def runners(planted: TaskPack) -> Iterator[dict[str, object]]:
    """One train-split runner per layer configuration, shared by the claim tests (started on first use)."""
    made = {
        name: PythonLanguage(planted, limits).runner(planted.split("train"), None)
        for name, limits in LAYERS.items()
    }
    yield made
    for runner in made.values():
        runner.close()  # type: ignore[attr-defined]


def run_claim(runners: dict[str, object], layer: str, program: Program) -> str:
    """The program's answer on the first training instance, skipping a layer this machine cannot provide."""
    runner = runners[layer]
    answer = runner.run(program, 20.0).outputs[0][1]  # type: ignore[attr-defined]
    layers = runner.sandbox.layers  # type: ignore[attr-defined]
    if layer == "seccomp" and not layers["seccomp"]:
        pytest.skip("seccomp filters need x86_64 Linux")
    if layer == "namespaces" and not (layers["namespaces"] and layers["chroot"]):
        pytest.skip("this user cannot create user namespaces here")
    return answer


# ---------------------------------------------------------------------------------------------- no network


@pytest.fixture
def tcp_server() -> Iterator[tuple[int, list[socket.socket]]]:
    """A real TCP server on 127.0.0.1 and the connections it accepted."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):  # the accept timeout: look at the stop flag again
                accepted.append(server.accept()[0])

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join()
    server.close()
    for connection in accepted:
        connection.close()


@pytest.mark.parametrize("layer", ["seccomp", "namespaces", "control"])
def test_no_network(
    runners: dict[str, object], layer: str, tcp_server: tuple[int, list[socket.socket]]
) -> None:
    port, accepted = tcp_server
    program = escaped(f"""
def main(instance):
    def raw():
        cls = next(c for c in ().__class__.__base__.__subclasses__()
                   if c.__module__ == "_socket" and c.__name__ == "socket")
        s = cls(2, 1)
        s.settimeout(2)
        s.connect(("127.0.0.1", {port}))
        return "connected"
    return attempt(raw) + " | " + attempt(lambda: IMPORT("socket").create_connection(("127.0.0.1", {port}), 2))
""")
    answer = run_claim(runners, layer, program)
    if layer == "control":  # without a kernel layer the escape reaches the server: the test can see it
        assert answer.startswith("ok: 'connected'"), answer
        deadline = time.monotonic() + 3
        while not accepted and time.monotonic() < deadline:
            time.sleep(0.05)
        assert accepted
    else:
        assert answer == "refused: PermissionError | refused: PermissionError" or (
            layer == "namespaces" and answer.startswith("refused: OSError | refused: ")
        ), answer
        time.sleep(0.3)
        assert accepted == []


# ------------------------------------------------------------------------------------------ no file writes


@pytest.mark.parametrize("layer", ["seccomp", "namespaces", "control"])
def test_no_file_writes(runners: dict[str, object], layer: str, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    program = escaped(f"""
def main(instance):
    os = IMPORT("os")
    folder = {str(tmp_path)!r}
    return " | ".join([
        attempt(lambda: B["open"](folder + "/created.txt", "w").close()),
        attempt(lambda: os.truncate(folder + "/victim.txt", 0)),
        attempt(lambda: os.rename(folder + "/victim.txt", folder + "/moved.txt")),
        attempt(lambda: os.unlink(folder + "/moved.txt")),
        attempt(lambda: os.mkdir(folder + "/made")),
        attempt(lambda: IMPORT("subprocess").run(["touch", folder + "/spawned.txt"])),
    ])
""")
    answer = run_claim(runners, layer, program)
    if layer == "control":  # RLIMIT_FSIZE alone stops no creating, truncating, renaming, deleting or spawning
        assert answer.split(" | ")[:5] == ["ok: None"] * 5, answer
        assert answer.split(" | ")[5].startswith("ok: CompletedProcess"), answer
        assert not victim.exists() and (tmp_path / "spawned.txt").exists()
    else:
        assert all(part.startswith("refused: ") for part in answer.split(" | ")), answer
        assert victim.read_text() == "keep me"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["victim.txt"]


# --------------------------------------------------------------------------------- no other split's rows


SNOOP = """
def main(instance):
    gc, os = IMPORT("gc"), IMPORT("os")
    isinstance = B["isinstance"]
    found, labels = set(), [0]
    low = int("424" + "242")  # not a literal: the program's own constants must not count

    def look(obj):
        items = list(obj.keys()) + list(obj.values()) if isinstance(obj, dict) else obj
        if not isinstance(items, (list, tuple, set, frozenset)):
            return
        for item in items:
            if isinstance(item, str) and (
                (item.startswith("row_") and item[4:].isdigit())
                or (item.startswith("TESTSECRET_") and item[11:].isdigit())
            ):
                found.add(item)
            elif isinstance(item, (int, float)) and not isinstance(item, bool) and low <= item < low + 50:
                labels[0] += 1

    gc.unfreeze()  # what the zygote froze before forking: every object of the process
    for obj in gc.get_objects():
        try:
            look(obj)
        except B["Exception"]:  # an object whose type is looked up lazily tries to import (open) a module
            pass
    labels = labels[0]
    disk = attempt(lambda: B["open"](DATA).read()[:20])
    proc = attempt(lambda: B["open"]("/proc/%d/cmdline" % os.getppid(), "rb").read()[:20])
    own = attempt(lambda: B["any"](
        key in B["open"]("/proc/self/" + name, "rb").read()
        for name in ("cmdline", "environ") for key in (b"row_", b"TESTSECRET")
    ))
    return ",".join(sorted(found)) + " | labels %d | " % labels + " | ".join([disk, proc, own])
"""


@pytest.mark.parametrize("layer", ["seccomp", "namespaces", "control"])
def test_no_other_split(runners: dict[str, object], layer: str, planted: TaskPack) -> None:
    data = str(planted.root / "data" / "test.csv")
    answer = run_claim(runners, layer, escaped(SNOOP.replace("DATA", repr(data))))
    ids, labels, disk, proc, own = answer.split(" | ")
    # the walk sees every training id (so it would see the others), and nothing else: not in any layer
    assert set(ids.split(",")) == set(planted.split("train").ids)
    assert labels == "labels 0"  # expected values never reach the worker
    if layer == "control":  # without a kernel layer the pack's files and /proc are open
        assert disk.startswith("ok: 'id,v,label"), disk
        assert proc.startswith("ok: "), proc
        assert own == "ok: False"  # its own command line and environment name no instance
    else:
        assert all(part.startswith("refused: ") for part in (disk, proc, own)), (disk, proc, own)


def test_the_kernel_limits_are_set(runners: dict[str, object]) -> None:
    program = escaped("""
def main(instance):
    r = IMPORT("resource")
    kinds = ["RLIMIT_DATA", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CORE", "RLIMIT_NPROC", "RLIMIT_CPU"]
    return repr([r.getrlimit(B["getattr"](r, kind))[0] for kind in kinds])
""")
    limits = LAYERS["control"]
    answer = run_claim(runners, "control", program)
    assert answer == repr([limits.memory_mb * 2**20, 0, limits.max_open_files, 0, 0, limits.cpu_cap_s])


# --------------------------------------------------------------------------------------- memory and time


def echo_sandbox(limits: PythonSandboxLimits | None = None) -> PythonSandbox:
    return PythonSandbox(
        [("a", {}), ("b", {})], harness=ECHO_HARNESS, entry="main", modules=ALLOWED_MODULES, limits=limits
    )


@pytest.mark.parametrize(
    "source",
    [
        "def main(instance):\n    return len(bytearray(4 * 2**30))\n",
        "import numpy as np\ndef main(instance):\n    return float(np.ones(2**29).sum())\n",
        "def main(instance):\n    grow = []\n    while True:\n        grow.append(bytearray(2**20))\n",
    ],
    ids=["bytearray-4GB", "numpy-4GB", "growing"],
)
def test_memory_bound(source: str) -> None:
    deadline = 10.0
    with echo_sandbox() as sandbox:
        sandbox.run(OK_PROGRAM, deadline)
        start = time.monotonic()
        with pytest.raises(EvaluationMemoryError, match="out of memory"):
            sandbox.run(source, deadline)
        assert time.monotonic() - start < deadline + 2
        assert sandbox.run(OK_PROGRAM, deadline).outputs == [("a", 1.0), ("b", 1.0)]
        assert sandbox.restarts == 1  # the process that hit its bound is gone: counted as a restart


@pytest.mark.parametrize(
    ("source", "how"),
    [
        ("def main(instance):\n    while True:\n        pass\n", "stopped"),
        (
            "def main(instance):\n    while True:\n        try:\n            while True:\n                pass\n"
            "        except:\n            pass\n",
            "killed",
        ),
    ],
    ids=["loop", "loop-that-swallows-the-stop"],
)
def test_deadline(source: str, how: str) -> None:
    deadline = 1.0
    with echo_sandbox() as sandbox:
        sandbox.run(OK_PROGRAM, 5.0)
        pid, restarts = sandbox.worker_pid, sandbox.restarts
        start = time.monotonic()
        with pytest.raises(EvaluationTimeout, match=f"deadline and was {how}"):
            sandbox.run(source, deadline)
        assert time.monotonic() - start < deadline + 2
        assert sandbox.run(OK_PROGRAM, 5.0).outputs == [("a", 1.0), ("b", 1.0)]
        # the zygote kills the program's own process; it lives on itself
        assert (sandbox.worker_pid, sandbox.restarts) == (pid, restarts + (how == "killed"))


def test_cpu_limit_ends_a_runaway_worker_by_itself() -> None:
    """RLIMIT_CPU: the kernel ends a worker past its CPU cap even when the parent would wait longer."""
    with echo_sandbox(PythonSandboxLimits(cpu_cap_s=1)) as sandbox:
        start = time.monotonic()
        with pytest.raises(EvaluationError, match="SIGXCPU"):
            sandbox.run("def main(instance):\n    while True:\n        pass\n", 20.0)
        assert time.monotonic() - start < 5


# ------------------------------------------------------------------------------------------------ validator


@pytest.fixture(scope="module")
def tsp() -> TaskPack:
    return load_task(TSP)


@pytest.fixture(scope="module")
def language(tsp: TaskPack) -> PythonLanguage:
    return PythonLanguage(tsp)


SIGNATURE = "def select_next_node(current_node, destination_node, unvisited_nodes, distance_matrix):\n"


@pytest.mark.parametrize(
    ("code", "fragment"),
    [
        ("import os\n" + SIGNATURE + "    return 1\n", "import of 'os' is not allowed"),
        ("import socket\n" + SIGNATURE + "    return 1\n", "import of 'socket' is not allowed"),
        ("from subprocess import run\n" + SIGNATURE + "    return 1\n", "import from 'subprocess'"),
        ("from . import x\n" + SIGNATURE + "    return 1\n", "import from '.'"),
        ("from math import *\n" + SIGNATURE + "    return 1\n", "'from math import *'"),
        (SIGNATURE + "    return open('x').read()\n", "'open' is not allowed"),
        (SIGNATURE + "    return eval('1')\n", "'eval' is not allowed"),
        (SIGNATURE + "    exec('x = 1')\n", "'exec' is not allowed"),
        (SIGNATURE + "    return compile('1', 'f', 'eval')\n", "'compile' is not allowed"),
        (SIGNATURE + "    return __import__('os')\n", "'__import__' is not allowed"),
        (SIGNATURE + "    return getattr(current_node, 'real')\n", "'getattr' is not allowed"),
        (SIGNATURE + "    return ().__class__\n", "attribute '__class__' is not allowed"),
        (SIGNATURE + "    return current_node.__subclasses__\n", "'__subclasses__'"),
        (SIGNATURE + "    return __builtins__\n", "'__builtins__' is not allowed"),
        (
            "import numpy as np\n" + SIGNATURE + "    return np.ctypeslib\n",
            "'numpy.ctypeslib', which is not allowed",
        ),
        ("import typing\n" + SIGNATURE + "    return typing.sys\n", "typing.sys is the module 'sys'"),
        ("from numpy import random\n" + SIGNATURE + "    return 1\n", "'numpy.random', which is not allowed"),
        ("import numpy as np\n" + SIGNATURE + "    return np.random.rand()\n", "'.random' is not allowed"),
        (
            "import numpy as np\nnp.argmin = np.argmax\n" + SIGNATURE + "    return 1\n",
            "'np.argmin' is not allowed",
        ),
        (
            "import numpy as np\nm = np\n" + SIGNATURE + "    return 1\n",
            "'np' may only be used as np.<attribute>",
        ),
        ("def select(a, b, c, d):\n    return 1\n", "defines no top-level function 'select_next_node'"),
        ("def select_next_node(a, b, c):\n    return 1\n", "must take 4 positional arguments"),
        ("async def select_next_node(a, b, c, d):\n    return 1\n", "must be a plain function, not async"),
        (SIGNATURE + "    return (\n", "does not parse"),
    ],
)
def test_validator_rejects_with_one_line(language: PythonLanguage, code: str, fragment: str) -> None:
    with pytest.raises(CandidateRejected) as rejection:
        language.validate(code)
    message = str(rejection.value)
    assert fragment in message and "\n" not in message, message


@pytest.mark.parametrize(
    "code",
    [
        SIGNATURE + "    return unvisited_nodes[0]\n",
        "def select_next_node(a, b, c, d, e=1):\n    return c[0]\n",
        "def select_next_node(a, *rest):\n    return rest[1][0]\n",
        "import numpy as np\nfrom numpy import linalg\nimport math, heapq\n"
        + SIGNATURE
        + "    return unvisited_nodes[int(np.argmin(linalg.norm(distance_matrix[unvisited_nodes], axis=1)))]\n",
        "class Helper:\n    def __init__(self):\n        self.k = 1\n"
        + SIGNATURE
        + "    return unvisited_nodes[Helper().k - 1]\n",
    ],
)
def test_validator_accepts(language: PythonLanguage, code: str) -> None:
    program = language.validate(code)
    assert (program.language, program.runnable) == ("python", code)


def test_cell_counts_nodes_and_branches(language: PythonLanguage, tsp: TaskPack) -> None:
    seed = language.validate(tsp.seed_program)
    nodes = sum(1 for _ in ast.walk(seed.tree))
    assert language.cell(seed) == f"{nodes // 50}:0"  # one function: no branching bin yet
    branchy = (
        SIGNATURE
        + "".join(
            f"    if current_node == {i}:\n        return [u for u in unvisited_nodes][0]\n" for i in range(4)
        )
        + "    return unvisited_nodes[0]\n"
    )
    assert language.cell(language.validate(branchy)).endswith(":2")  # 1 def + 4 ifs + 4 comprehensions = 9


# ------------------------------------------------------------------------------------- the language seam


def test_language_for_a_python_pack(tsp: TaskPack) -> None:
    assert isinstance(language_for(tsp), PythonLanguage)


def test_rows_the_harness_refuses_score_zero_and_the_rest_are_scored(tsp: TaskPack) -> None:
    evaluator = Evaluator(tsp, ("val",))
    try:
        seed = evaluator.evaluate(tsp.seed_program, "val")
        # returns a visited node (0) on every instance whose first coordinate is above 0.5
        picky = SIGNATURE.replace("def", "import numpy as np\n\ndef", 1) + (
            "    if distance_matrix[0][1] > 0.5:\n        return 0\n"
            "    return unvisited_nodes[np.argmin(distance_matrix[current_node][unvisited_nodes])]\n"
        )
        outcome = evaluator.evaluate(picky, "val")
        broken = [row for row in outcome.rows if row.error is not None]
        assert outcome.ok and 0 < len(broken) < len(outcome.rows)
        # the harness's reason reaches the row
        assert {row.error for row in broken} == {
            "ValueError: select_next_node returned 0, which is not an unvisited node"
        }
        assert all(row.score == 0 for row in broken)
        kept = {row.instance_id: row.score for row in outcome.rows if row.error is None}
        assert kept == {row.instance_id: row.score for row in seed.rows if row.instance_id in kept}
        everywhere = evaluator.evaluate(SIGNATURE + "    return 0\n", "val")
        assert everywhere.score == 0 and "failed on every instance" in (everywhere.error or "")
        assert "which is not an unvisited node" in (everywhere.error or "")
        loading = evaluator.evaluate("x = 1 / 0\n" + SIGNATURE + "    return 1\n", "val")
        assert "fails when loaded: ZeroDivisionError" in (loading.error or "")
    finally:
        evaluator.close()


def test_one_program_cannot_change_what_the_next_computes(tsp: TaskPack) -> None:
    """Each program runs in a process of its own, forked from the zygote (the validator also rejects such a program)."""
    runner = PythonLanguage(tsp).runner(tsp.split("train"), None)
    try:
        seed = Program("python", tsp.seed_program, tsp.seed_program, None)
        before = runner.run(seed, 20.0).outputs
        poison = "import numpy as np\nnp.argmin = np.argmax\n" + tsp.seed_program
        poisoned = runner.run(Program("python", poison, poison, None), 20.0).outputs
        assert poisoned != before
        assert runner.run(seed, 20.0).outputs == before
    finally:
        runner.close()


def test_restricted_builtins_hold_without_the_validator(tsp: TaskPack) -> None:
    runner = PythonLanguage(tsp).runner(tsp.split("train"), None)
    try:
        for source, reason in [
            (
                SIGNATURE + "    return open('/etc/hostname').read()\n",
                "NameError: name 'open' is not defined",
            ),
            ("import os\n" + SIGNATURE + "    return 1\n", "ImportRefused: import of 'os' is not allowed"),
        ]:
            with pytest.raises(EvaluationError, match=reason):
                runner.run(Program("python", source, source, None), 20.0)
    finally:
        runner.close()


# ---------------------------------------------------------------------------------------------- operators


def test_operators_on_the_seed(tsp: TaskPack) -> None:
    tree = ast.parse(tsp.seed_program)
    pool = python_ops.term_pool(tree, [])
    texts = {ast.unparse(term) for term, _ in pool}
    assert {
        "distance_matrix[current_node][unvisited_nodes]",
        "distance_matrix[destination_node][unvisited_nodes]",
        "np.mean(distance_matrix[unvisited_nodes][:, unvisited_nodes], axis=1)",
        "np.partition(distance_matrix[unvisited_nodes][:, unvisited_nodes], 1, axis=1)[:, 1]",
    } == texts
    inserted = list(python_ops.insert_terms(tree, pool))
    assert len(inserted) == 3 * len(python_ops.WEIGHTS)  # the objective's own term is not inserted again
    assert (
        "np.argmin(distance_matrix[current_node][unvisited_nodes] - 0.5 * distance_matrix[destination_node]"
        in (
            next(
                e for e in inserted if e.approach.startswith("insert term -0.5 * distance_matrix[destination")
            ).code
        )
    )
    assert list(python_ops.tune_constants(tree)) == []  # the seed has no constant


def test_tune_drop_swap_guard_and_recombine() -> None:
    parent = ast.parse(
        "import numpy as np\n\ndef f(c, d, u, m):\n"
        "    if len(u) < 2:\n        return u[0]\n"
        "    if c == d:\n        return u[-1]\n"
        "    return u[np.argmin(m[c][u] + 0.5 * m[d][u])]\n"
    )
    tuned = [e.code for e in python_ops.tune_constants(parent)]
    assert any("0.25 * m[d][u]" in code for code in tuned) and any("len(u) < 3" in code for code in tuned)
    dropped = [e.code for e in python_ops.drop_terms(parent)]
    assert any("np.argmin(0.5 * m[d][u])" in code for code in dropped)
    assert any("np.argmin(m[c][u])" in code for code in dropped)
    assert any("if len(u) < 2" not in code for code in (e.code for e in python_ops.drop_guards(parent)))
    swapped = next(python_ops.swap_guards(parent)).code
    assert swapped.index("if c == d") < swapped.index("if len(u) < 2")
    guards = [e for e in python_ops.insert_guards(parent, [])]
    assert any(e.code.split("\n")[3].strip() == "if len(u) <= 3:" for e in guards)
    donor = python_ops.Donor(
        "1-7",
        ast.parse(
            "import numpy as np\n\ndef f(c, d, u, m):\n"
            "    if len(u) < 2:\n        return u[0]\n"
            "    if c == d:\n        return u[-1]\n"
            "    return u[np.argmin(m[c][u] + 1.5 * m[d][u])]\n"
        ),
    )
    recombined = list(python_ops.recombine(parent, [donor]))
    blend = next(e for e in recombined if e.approach == "recombine: average the constants with 1-7")
    assert "1.0 * m[d][u]" in blend.code and blend.donor_id == "1-7"
    assert any("objective" in e.approach and "1.5 * m[d][u]" in e.code for e in recombined)


@pytest.fixture(scope="module")
def tsp_env(tsp: TaskPack) -> Iterator[DraftEnvironment]:
    evaluator = Evaluator(tsp)
    yield DraftEnvironment(evaluator)
    evaluator.close()


def test_mutator_proposes_its_best_tested_draft_and_never_repeats(
    tsp: TaskPack, tsp_env: DraftEnvironment
) -> None:
    parent = ProgramView("1-0", tsp.seed_program, 0.69)
    mutator = PythonOfflineMutator(OfflineSettings(max_drafts=6))
    first = mutator.propose(MutationRequest(1, parent, tsp_env), np.random.default_rng(5))
    again = mutator.propose(MutationRequest(1, parent, tsp_env), np.random.default_rng(5))
    assert first == again  # a pure function of the request, the data and the RNG
    assert first.notes["drafts_tested"] == 6
    assert (
        first.notes["train_score"] == tsp_env.test_draft(first.code).score > first.notes["parent_train_score"]
    )
    tried = ContextBundle(tried=frozenset({first.approach}))
    second = mutator.propose(MutationRequest(2, parent, tsp_env, tried), np.random.default_rng(5))
    assert second.approach != first.approach


def test_mutator_without_probes_tests_nothing(tsp: TaskPack, tsp_env: DraftEnvironment) -> None:
    parent = ProgramView("1-0", tsp.seed_program, 0.69)
    before = tsp_env.drafts_tested
    proposal = PythonOfflineMutator(OfflineSettings(probe=False)).propose(
        MutationRequest(1, parent, tsp_env), np.random.default_rng(1)
    )
    assert tsp_env.drafts_tested == before
    assert proposal.code != tsp.seed_program and tsp_env.check(proposal.code) is None


def test_mutator_settings(language: PythonLanguage) -> None:
    """The settings are checked once, by the registry, against the composed table; the mutator gets them typed."""
    from coco_sql.engine.registry import build_mutator

    built = build_mutator("offline", language, {"max_drafts": 4, "probe": False})
    assert (built.max_drafts, built.probe) == (4, False)
    with pytest.raises(ConfigError, match="no setting 'temperature'"):
        build_mutator("offline", language, {"temperature": 0.7})
    with pytest.raises(ConfigError, match=r"setting 'max_drafts' must be an integer in \[1, 1024\]"):
        build_mutator("offline", language, {"max_drafts": 0})
    with pytest.raises(ConfigError, match="setting 'probe' must be bool"):
        build_mutator("offline", language, {"probe": "yes"})


def test_the_offline_mutator_is_registered_for_python(language: PythonLanguage) -> None:
    from coco_sql.engine.registry import build_mutator

    assert isinstance(build_mutator("offline", language, {"max_drafts": 4}), PythonOfflineMutator)
