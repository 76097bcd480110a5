"""PACE primitives: Thompson posteriors, the P1-P4 call-set contracts, SQL macros expanded before validation,
offline extraction and generation, on real sqlglot, real DuckDB and the real packs."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import duckdb
import numpy as np
import pytest

from coco_sql.errors import CandidateRejected
from coco_sql.evaluate import Evaluator
from coco_sql.languages.python.language import PythonLanguage
from coco_sql.languages.sql import SqlLanguage
from coco_sql.languages.sql.pace_edits import refactor_into_call
from coco_sql.languages.sql.pace_extract import sql_guards
from coco_sql.primitives import (
    Contract,
    Posterior,
    Primitive,
    PrimitiveLibrary,
    PrimitiveTrial,
    posteriors,
    thompson_pick,
    verify,
)
from coco_sql.primitives.adopt import adopt
from coco_sql.primitives.calls import call_set, definitions
from coco_sql.primitives.edits import prune_definitions, replace_calls, with_definitions
from coco_sql.primitives.extraction import combine, extract
from coco_sql.sqlkit.macros import expand_program, split_macros
from coco_sql.sqlkit.validate import validate_candidate
from coco_sql.tasks import TaskPack, load_task

ENTRY = "select_next_node"
SIGNATURE = "current_node, destination_node, unvisited_nodes, distance_matrix"


@pytest.fixture(scope="module")
def lockpicking6() -> TaskPack:
    return load_task("lockpicking6")


@pytest.fixture(scope="module")
def tsp() -> TaskPack:
    return load_task("tsp_construct")


@pytest.fixture
def evaluator(lockpicking6: TaskPack) -> Iterator[Evaluator]:
    ev = Evaluator(lockpicking6, ("val",))
    yield ev
    ev.close()


# ------------------------------------------------------------------------------------------ Thompson


def trial(focus: str, improved: bool, verified: bool = True, iteration: int = 1) -> PrimitiveTrial:
    return PrimitiveTrial(
        iteration, f"1-{iteration}", "P1", focus, 0.5, 0.6 if improved else 0.4, improved, verified
    )


def sql_primitive(name: str, body: str, params: str = "x", iteration: int = 0) -> Primitive:
    return Primitive(
        name,
        "sql",
        f"CREATE MACRO {name}({params}) AS {body};",
        f"{name}({params})",
        None,
        iteration,
        "seeded",
    )


def test_posteriors_count_verified_trials_only() -> None:
    library = PrimitiveLibrary((sql_primitive("p_a", "x > 1"), sql_primitive("p_b", "x < 1")))
    trials = [trial("p_a", True), trial("p_a", True), trial("p_a", False), trial("p_b", False)]
    found = posteriors(library, trials)
    assert found == {"p_a": Posterior(3.0, 2.0), "p_b": Posterior(1.0, 2.0)}
    assert found["p_a"].mean == pytest.approx(0.6) and found["p_a"].trials == 3
    # a contract violation, a trial of a name outside the library and one without a focus change nothing
    noise = [trial("p_a", True, verified=False), trial("p_zz", True), replace(trial("p_a", True), focus=None)]
    assert posteriors(library, [*trials, *noise]) == found
    assert posteriors(library, []) == {"p_a": Posterior(), "p_b": Posterior()}


def test_thompson_pick_is_deterministic_and_favours_the_primitive_that_helps() -> None:
    post = {"p_good": Posterior(10, 2), "p_bad": Posterior(2, 10), "p_new": Posterior()}
    names = ["p_new", "p_good", "p_bad"]
    first = [thompson_pick(names, post, np.random.default_rng(7), n=2) for _ in range(3)]
    assert first[0] == first[1] == first[2] and len(first[0]) == 2
    # the order the names come in does not matter: draws happen in sorted-name order
    assert thompson_pick(reversed(names), post, np.random.default_rng(7), n=2) == first[0]
    rng = np.random.default_rng(2024)
    wins = sum(thompson_pick(["p_good", "p_bad"], post, rng) == ["p_good"] for _ in range(200))
    assert wins >= 180
    assert set(thompson_pick(names, post, rng, n=5, exclude=["p_good"])) == {"p_new", "p_bad"}
    assert thompson_pick([], post, rng) == [] and thompson_pick(names, post, rng, n=0) == []


def test_library_orders_names_and_rejects_duplicates() -> None:
    library = (
        PrimitiveLibrary()
        .add(sql_primitive("p_b", "x", iteration=2))
        .add(sql_primitive("p_a", "x", iteration=2))
    )
    library = library.add(sql_primitive("p_z", "x", iteration=1))
    assert library.names() == ("p_z", "p_a", "p_b") and len(library) == 3 and "p_a" in library
    assert PrimitiveLibrary.from_rows(reversed(library.primitives)) == library
    with pytest.raises(ValueError, match="already in the library"):
        library.add(sql_primitive("p_a", "x"))
    assert library.unique_name("a") == "p_a_2" and library.unique_name("P1 = 4!") == "p_p1_4"
    assert library.get("p_z").created_iteration == 1 and library.for_language("python") == ()


# ------------------------------------------------------------------------------------------ contracts

SQL_LIBRARY = PrimitiveLibrary(tuple(sql_primitive(f"p_{c}", f"x > {i}") for i, c in enumerate("abcd")))
PY_LIBRARY = PrimitiveLibrary(
    tuple(
        Primitive(
            f"p_{c}",
            "python",
            f"import math\n\n\ndef p_{c}(x):\n    return math.sqrt(x) + {i}",
            f"p_{c}(x)",
            None,
            0,
            "seeded",
        )
        for i, c in enumerate("abcd")
    )
)


def program(language: str, calls: str, redefine: str | None = None) -> str:
    """A complete program calling the primitives named by the letters of `calls`, with their definitions."""
    library = SQL_LIBRARY if language == "sql" else PY_LIBRARY
    used = [library.get(f"p_{c}") for c in calls]
    if redefine is not None:
        used = [
            replace(p, code=p.code.replace("x >", "x >=").replace("+ ", "- ")) if p.name == redefine else p
            for p in used
        ]
    if language == "sql":
        terms = " + ".join(f"CASE WHEN p_{c}(p) THEN 1 ELSE 0 END" for c in calls) or "0"
        query = f"SELECT id, {terms} AS label FROM (SELECT id, CAST(SUBSTRING(code, 1, 1) AS INTEGER) AS p FROM input)"
    else:
        total = " + ".join(f"p_{c}(current_node)" for c in calls) or "0"
        query = f"def {ENTRY}({SIGNATURE}):\n    score = {total}\n    return unvisited_nodes[0]\n"
    return with_definitions(query, language, used)


CASES = {
    "P1 valid": (Contract("P1", focus="p_b"), "a", "ab", None, None),
    "P1 missing focus": (Contract("P1", focus="p_b"), "a", "a", None, "P1: child does not call focus p_b"),
    "P1 dropped protected": (Contract("P1", focus="p_b"), "ac", "bc", None, "P1: child drops protected p_a"),
    "P2 valid": (Contract("P2", focus="p_b", target="p_a"), "ac", "bc", None, None),
    "P2 still calls target": (Contract("P2", focus="p_b", target="p_a"), "ac", "abc", None, "P2: child still calls target p_a"),
    "P2 missing replacement": (Contract("P2", focus="p_b", target="p_a"), "ac", "c", None, "P2: child does not call replacement p_b"),
    "P2 dropped other": (Contract("P2", focus="p_b", target="p_a"), "ac", "b", None, "P2: child drops protected p_c"),
    "P3 valid": (Contract("P3"), "ac", "ca", None, None),
    "P3 added": (Contract("P3"), "ac", "abc", None, "P3: child adds p_b"),
    "P3 removed": (Contract("P3"), "ac", "a", None, "P3: child removes p_c"),
    "P4 valid": (Contract("P4"), "ac", "ab", "bd", None),
    "P4 nothing from parent 2": (Contract("P4"), "ac", "ac", "bd", "P4: child calls nothing from parent 2 (p_b, p_d)"),
    "P4 more than k": (Contract("P4"), "ac", "abcd", "bd", "P4: child calls 4 primitives (p_a, p_b, p_c, p_d), more than k=3"),
    "k bound on P1": (Contract("P1", focus="p_d"), "abc", "abcd", None, "more than k=3"),
    "k bound raised": (Contract("P1", focus="p_d", k=4), "abc", "abcd", None, None),
    "exposed set V": (Contract("P1", focus="p_b", exposed=frozenset({"p_b"})), "ac", "b", None, None),
}  # fmt: skip


@pytest.mark.parametrize("language", ["sql", "python"])
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_contracts_accept_valid_children_and_name_each_violation(
    language: str, case: tuple[Contract, str, str, str | None, str | None]
) -> None:
    contract, parent, child, other, expected = case
    library = SQL_LIBRARY if language == "sql" else PY_LIBRARY
    reason = verify(
        contract,
        program(language, parent),
        program(language, child),
        language,
        library,
        None if other is None else program(language, other),
    )
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and expected in reason and "\n" not in reason


@pytest.mark.parametrize("language", ["sql", "python"])
def test_a_child_that_redefines_or_drops_a_definition_or_does_not_parse_violates(language: str) -> None:
    library = SQL_LIBRARY if language == "sql" else PY_LIBRARY
    contract = Contract("P1", focus="p_b")
    parent = program(language, "a")
    assert verify(contract, parent, program(language, "ab", redefine="p_b"), language, library) == (
        "P1: child redefines p_b"
    )
    assert verify(contract, parent, program(language, "ab", redefine="p_c"), language, library) is None
    bare = program(language, "ab")
    if language == "sql":
        without = "\n".join(line for line in bare.splitlines() if not line.startswith("CREATE MACRO p_b"))
    else:
        without = prune_definitions(bare.replace("p_b(current_node)", "0"), language, library).replace(
            "score = ", "score = p_b(current_node) + "
        )
    assert (
        verify(contract, parent, without, language, library) == "P1: child calls p_b without its definition"
    )
    broken = verify(contract, parent, "SELECT (" if language == "sql" else "def (", language, library)
    assert broken is not None and broken.startswith("P1: child does not parse")


def test_call_sets_see_calls_not_definitions() -> None:
    sql = program("sql", "ab")
    assert call_set(sql, "sql", SQL_LIBRARY.names()) == {"p_a", "p_b"}
    unused = with_definitions(sql, "sql", [SQL_LIBRARY.get("p_c")])
    assert call_set(unused, "sql", SQL_LIBRARY.names()) == {"p_a", "p_b"}
    assert set(definitions(unused, "sql")) == {"p_a", "p_b", "p_c"}
    assert prune_definitions(unused, "sql", SQL_LIBRARY).count("CREATE MACRO") == 2
    python = with_definitions(program("python", "a"), "python", [PY_LIBRARY.get("p_d")])
    assert call_set(python, "python", PY_LIBRARY.names()) == {"p_a"}  # p_d is defined, never called
    pruned = prune_definitions(python, "python", PY_LIBRARY)
    assert "def p_d" not in pruned and "def p_a" in pruned and "\n\n\n\n" not in pruned


def test_children_built_for_the_contracts_validate(lockpicking6: TaskPack, tsp: TaskPack) -> None:
    program_ = SqlLanguage(lockpicking6).validate(program("sql", "abc"))
    assert "p_a" not in program_.runnable and "CASE" in program_.runnable
    PythonLanguage(tsp).validate(program("python", "abc"))


# ------------------------------------------------------------------------------------------ SQL macros


def seed_with_macro(lockpicking6: TaskPack) -> str:
    library = PrimitiveLibrary()
    lock = extract(
        lockpicking6.seed_program, "sql", library, origin_program="1-0", iteration=0, prefer="p1 = 4"
    )
    assert lock is not None and lock.code == "CREATE MACRO p_p1_eq(p1) AS p1 = 4;"
    code = refactor_into_call(lockpicking6.seed_program, lock)
    assert code is not None and code.count("p_p1_eq(p1)") == 3  # the definition and two calls
    return code


def test_a_program_with_a_macro_runs_as_the_hand_inlined_program(
    lockpicking6: TaskPack, evaluator: Evaluator
) -> None:
    code = seed_with_macro(lockpicking6)
    checked = SqlLanguage(lockpicking6).validate(code)
    assert checked.source == code and "p_p1_eq" not in checked.runnable.lower()
    assert "CREATE" not in checked.runnable and checked.tree.find(__import__("sqlglot").exp.Anonymous) is None
    seed = evaluator.evaluate(lockpicking6.seed_program, "val")
    macro = evaluator.evaluate(code, "val")
    assert macro.ok and macro.score == seed.score == pytest.approx(0.02)
    assert [r.output for r in macro.rows] == [r.output for r in seed.rows]
    # and the program text as it is (macros, then the query) runs in DuckDB to the same labels
    con = duckdb.connect()
    con.register("input", lockpicking6.split("val").inputs)
    con.execute(code.split(";\n", 1)[0])
    as_is = con.execute(code.split(";\n", 1)[1]).fetchall()
    assert sorted((str(i), str(v)) for i, v in as_is) == sorted((r.instance_id, r.output) for r in seed.rows)


def test_a_program_without_macros_validates_exactly_as_before(lockpicking6: TaskPack) -> None:
    language = SqlLanguage(lockpicking6)
    for code in (
        lockpicking6.seed_program,
        "SELECT id, 'macro' AS label FROM input",
        "SELECT id, 1 AS label FROM input",
    ):
        direct = validate_candidate(code, language.spec)
        program_ = language.validate(code)
        assert (program_.source, program_.runnable) == (code, direct.sql)
    assert expand_program(lockpicking6.seed_program, "duckdb") is None


REJECTED = {
    "table macro": ("CREATE MACRO p_t(a) AS TABLE SELECT a; SELECT id, 1 AS label FROM input", "macro p_t is a table macro"),
    "nested macro": (
        "CREATE MACRO p_a(a) AS a > 1; CREATE MACRO p_b(b) AS p_a(b) OR b < 0; "
        "SELECT id, CASE WHEN p_b(LENGTH(code)) THEN 1 ELSE 0 END AS label FROM input",
        "macro p_b calls macro p_a: a primitive must not call another",
    ),
    "wrong arity": (
        "CREATE MACRO p_a(a, b) AS a > b; SELECT id, CASE WHEN p_a(LENGTH(code)) THEN 1 ELSE 0 END AS label FROM input",
        "p_a takes 2 arguments (a, b), called with 1",
    ),
    "statement after query": (
        "CREATE MACRO p_a(a) AS a > 1; SELECT id, 1 AS label FROM input; DROP TABLE input",
        "a statement follows the query",
    ),
    "macro after query": (
        "CREATE MACRO p_a(a) AS a > 1; SELECT id, 1 AS label FROM input; CREATE MACRO p_b(b) AS b",
        "CREATE MACRO p_b comes after the query",
    ),
    "other statement": ("CREATE TABLE t AS SELECT 1; CREATE MACRO p_a(a) AS a; SELECT 1", "CREATE TABLE is not allowed"),
    "duplicate": ("CREATE MACRO p_a(a) AS a; CREATE MACRO P_A(b) AS b; SELECT 1", "macro p_a is defined twice"),
    "stray column": ("CREATE MACRO p_a(a) AS a > code; SELECT 1", "macro p_a uses code, which is not among"),
    "builtin name": ("CREATE MACRO upper(a) AS a; SELECT 1", "macro name upper is a built-in function"),
    "too many": ("".join(f"CREATE MACRO p_{i}(a) AS a; " for i in range(9)) + "SELECT 1", "defines 9 macros (at most 8)"),
    "body breaks the allow-list": (
        "CREATE MACRO p_a(a) AS read_text(a); SELECT id, p_a(code) AS label FROM input",
        "read_text",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", REJECTED.values(), ids=REJECTED.keys())
def test_bad_macros_are_rejected_with_one_line(lockpicking6: TaskPack, case: tuple[str, str]) -> None:
    code, message = case
    with pytest.raises(CandidateRejected) as caught:
        SqlLanguage(lockpicking6).validate(code)
    assert message.lower() in str(caught.value).lower() and "\n" not in str(caught.value)


def test_a_snowflake_query_with_a_snowflake_macro(lockpicking6: TaskPack, evaluator: Evaluator) -> None:
    snowflake = replace(lockpicking6, dialect="snowflake")
    code = seed_with_macro(lockpicking6).replace(
        "CREATE MACRO p_p1_eq(p1) AS p1 = 4;",
        "CREATE OR REPLACE TEMP MACRO p_p1_eq(p1) AS IFF(p1 = 4, TRUE, FALSE);",
    )
    macros, query = split_macros(code, "snowflake")
    assert [m.signature for m in macros] == ["p_p1_eq(p1)"] and query.lstrip().startswith("/*")
    checked = SqlLanguage(snowflake).validate(code)
    assert "IFF" not in checked.runnable and "CASE WHEN" in checked.runnable  # transpiled to DuckDB
    ev = Evaluator(snowflake, ("val",))
    try:
        assert ev.evaluate(code, "val").score == evaluator.evaluate(lockpicking6.seed_program, "val").score
    finally:
        ev.close()


# ------------------------------------------------------------------------------------------ extraction


def test_extraction_from_the_lockpicking_seed_gives_a_macro_that_validates_back(
    lockpicking6: TaskPack,
) -> None:
    seed = lockpicking6.seed_program
    guards = [g.text for g in sql_guards(seed)]
    assert guards[0] == "NOT p1 IN (1, 4, 7)" and guards[-1] == "p1 = 4" and len(guards) == 7
    library = PrimitiveLibrary()
    first = extract(seed, "sql", library, origin_program="1-0", iteration=3, rng=np.random.default_rng(5))
    again = extract(seed, "sql", library, origin_program="1-0", iteration=3, rng=np.random.default_rng(5))
    assert first == again and first is not None
    assert (first.how, first.origin_program, first.created_iteration) == ("extracted", "1-0", 3)
    assert first.name.startswith("p_") and first.signature.startswith(f"{first.name}(p")
    child = refactor_into_call(seed, first)
    assert child is not None and call_set(child, "sql", [first.name]) == {first.name}
    SqlLanguage(lockpicking6).validate(child)
    assert seed == lockpicking6.seed_program  # the source program is not altered
    # a guard already in the library is not extracted again
    library = library.add(first)
    later = [
        extract(seed, "sql", library, origin_program="1-0", iteration=4, rng=np.random.default_rng(s))
        for s in range(6)
    ]
    assert all(p is not None and p.code.split(" AS ", 1)[1] != first.code.split(" AS ", 1)[1] for p in later)
    assert (
        extract("SELECT id, 1 AS label FROM input", "sql", library, origin_program=None, iteration=4) is None
    )


def test_extraction_skips_unsuitable_guards() -> None:
    code = (
        "SELECT id, CASE WHEN code IN (SELECT code FROM input) THEN 1 WHEN a.x > b.y THEN 2 "
        "WHEN SUM(x) OVER () > 1 THEN 3 WHEN AI_FILTER(PROMPT('is {0} odd', code)) THEN 4 WHEN p_z(code) THEN 5 "
        "WHEN x THEN 6 ELSE 0 END AS label FROM input WHERE LENGTH(code) > 3 AND id <> 'x'"
    )
    assert [g.text for g in sql_guards(code, macro_names=frozenset({"p_z"}))] == [
        "LENGTH(code) > 3",
        "id <> 'x'",
    ]


def test_python_extraction_from_the_tsp_seed(tsp: TaskPack) -> None:
    library = PrimitiveLibrary()
    found = extract(tsp.seed_program, "python", library, origin_program="1-0", iteration=1, entry=ENTRY)
    assert found is not None and found.signature == "p_argmin(current_node, unvisited_nodes, distance_matrix)"
    assert found.code.startswith("import numpy as np\n") and "return np.argmin(" in found.code
    child = with_definitions(
        tsp.seed_program.replace(
            "np.argmin(distance_matrix[current_node][unvisited_nodes])",
            "p_argmin(current_node, unvisited_nodes, distance_matrix)",
        ),
        "python",
        [found],
    )
    PythonLanguage(tsp).validate(child)
    assert call_set(child, "python", [found.name]) == {"p_argmin"}
    assert definitions(child, "python")["p_argmin"] == definitions(found.code, "python")["p_argmin"]
    evaluator = Evaluator(tsp, ("val",))
    try:
        ids = tsp.split("val").ids[:2]
        assert (
            evaluator.evaluate(child, "val", ids).score
            == evaluator.evaluate(tsp.seed_program, "val", ids).score
        )
    finally:
        evaluator.close()
    # the seed's whole return value is the target itself, never a candidate; the next one is smaller
    second = extract(
        tsp.seed_program, "python", library.add(found), origin_program="1-0", iteration=2, entry=ENTRY
    )
    assert second is not None and "return distance_matrix[current_node][unvisited_nodes]" in second.code


def test_python_extraction_prefers_a_self_contained_helper() -> None:
    code = (
        "import math\nimport numpy as np\n\nK = 3\n\n\ndef gap(d, i, j):\n    return math.fabs(d[i][j] - d[j][i])\n\n\n"
        "def uses_global(x):\n    return x + K\n\n\n"
        f"def {ENTRY}({SIGNATURE}):\n    k = uses_global(1)\n    g = gap(distance_matrix, current_node, destination_node)\n"
        "    return unvisited_nodes[np.argmin(distance_matrix[current_node][unvisited_nodes]) + k * 0]\n"
    )
    found = extract(code, "python", PrimitiveLibrary(), origin_program="1-5", iteration=5, entry=ENTRY)
    assert found is not None and found.name == "p_gap" and found.signature == "p_gap(d, i, j)"
    assert found.code == "import math\n\n\ndef p_gap(d, i, j):\n    return math.fabs(d[i][j] - d[j][i])"


def test_combine_makes_a_new_primitive_that_programs_can_use(lockpicking6: TaskPack, tsp: TaskPack) -> None:
    a, b = sql_primitive("p_a", "x > 1"), sql_primitive("p_b", "y < 3", "y")
    library = PrimitiveLibrary((a, b))
    made = combine(a, b, library, np.random.default_rng(0), iteration=7)
    assert made is not None and made.how == "generated" and made.signature == f"{made.name}(x, y)"
    assert made.code in (
        f"CREATE MACRO {made.name}(x, y) AS (x > 1) AND (y < 3);",
        f"CREATE MACRO {made.name}(x, y) AS (x > 1) OR (y < 3);",
    )
    assert combine(a, sql_primitive("p_n", "x + 1"), library, np.random.default_rng(0), iteration=7) is None
    assert combine(a, b, library.add(made), np.random.default_rng(0), iteration=7) is None  # already there
    child = with_definitions(
        f"SELECT id, CASE WHEN {made.name}(LENGTH(code), 2) THEN 1 ELSE 0 END AS label FROM input",
        "sql",
        [made],
    )
    SqlLanguage(lockpicking6).validate(child)
    pa, pb = PY_LIBRARY.get("p_a"), PY_LIBRARY.get("p_b")
    mixed = combine(pa, pb, PY_LIBRARY, np.random.default_rng(0), iteration=7)
    assert mixed is not None and mixed.signature == f"{mixed.name}(x)" and "_first(x) + " in mixed.code
    user = with_definitions(
        program("python", "").replace("score = 0", f"score = {mixed.name}(current_node)"), "python", [mixed]
    )
    PythonLanguage(tsp).validate(user)
    assert call_set(user, "python", PY_LIBRARY.add(mixed).names()) == {mixed.name}


def test_replace_calls_needs_the_same_arity() -> None:
    code = program("sql", "ab")
    renamed = replace_calls(code, "sql", SQL_LIBRARY.get("p_a"), SQL_LIBRARY.get("p_c"))
    assert (
        renamed is not None
        and "p_c(p)" in renamed
        and "p_a(p)" not in renamed
        and "CREATE MACRO p_a(x)" in renamed
    )
    child = prune_definitions(with_definitions(renamed, "sql", [SQL_LIBRARY.get("p_c")]), "sql", SQL_LIBRARY)
    assert verify(Contract("P2", focus="p_c", target="p_a"), code, child, "sql", SQL_LIBRARY) is None
    wide = sql_primitive("p_w", "x > y", "x, y")
    assert replace_calls(code, "sql", SQL_LIBRARY.get("p_a"), wide) is None
    assert replace_calls(code, "sql", SQL_LIBRARY.get("p_d"), SQL_LIBRARY.get("p_c")) is None
    py = replace_calls(program("python", "ab"), "python", PY_LIBRARY.get("p_b"), PY_LIBRARY.get("p_d"))
    assert py is not None and "p_d(current_node)" in py and "def p_b(x)" in py


def test_adopt_admits_a_self_contained_primitive_and_refuses_the_rest() -> None:
    made = adopt(
        "def helper(current_node, distance_matrix):\n    return float(np.max(distance_matrix[current_node]))\n".replace(
            "def", "import numpy as np\n\ndef", 1
        ),
        "python",
        PY_LIBRARY,
        how="generated",
        iteration=2,
        inputs=SIGNATURE.split(", "),
    )
    assert made.name == "p_helper" and made.code.startswith("import numpy as np\n")
    refusals = {
        "def p_x(x):\n    return p_a(x) + 1": "calls p_a",
        "def p_x(x):\n    return x + K": "reads K",
        "def p_x(x):\n    return x\n\n\ndef p_y(y):\n    return y": "one def",
        "import math\n\n\ndef p_x(x):\n    return math.sqrt(x) + 3": "already has",
    }
    for code, message in refusals.items():
        with pytest.raises(CandidateRejected, match=message):
            adopt(code, "python", PY_LIBRARY, how="generated", iteration=2)
    with pytest.raises(CandidateRejected, match="which the target function does not have"):
        adopt(
            "def p_x(speed):\n    return speed",
            "python",
            PY_LIBRARY,
            how="generated",
            iteration=2,
            inputs=["x"],
        )
    sql = adopt("CREATE MACRO locked(v) AS v = 4", "sql", SQL_LIBRARY, how="generated", iteration=2)
    assert (sql.name, sql.code) == ("p_locked", "CREATE MACRO p_locked(v) AS v = 4;")
    with pytest.raises(CandidateRejected, match="already has"):
        adopt("CREATE MACRO p_q(y) AS y > 0", "sql", SQL_LIBRARY, how="generated", iteration=2)
    with pytest.raises(CandidateRejected, match="calls p_a"):
        adopt("CREATE MACRO p_q(y) AS p_a(y) AND y < 9", "sql", SQL_LIBRARY, how="generated", iteration=2)
