"""Tests for coco_sql.tasks and the two first packs, on the real files and a real DuckDB.

This file holds the full lockpicking6 rule set as a reference implementation; tests are not readable by
the search, unlike tasks/lockpicking6/.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from coco_sql.errors import TaskError
from coco_sql.tasks import (
    Contract,
    ExactScorer,
    MultilabelF1Scorer,
    NumericScorer,
    SqlScorer,
    TaskPack,
    TokenMatchScorer,
    coerce_output,
    default_search_paths,
    list_tasks,
    load_task,
    partition_ids,
)

REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "tasks"

# ----------------------------------------------------------------------------- lockpicking6 reference

CANDIDATES = ({1, 4, 7}, {2, 6, 8}, {0, 3, 9}, {1, 4, 7}, {0, 5, 8}, {2, 5, 9})
RULES = {
    (1, 4): (2, 6),
    (1, 1): (3, 5),
    (2, 8): (1, 3),
    (2, 6): (4, 5),
    (3, 3): (1, 2),
    (3, 0): (4, 6),
    (4, 7): (2, 3),
    (4, 1): (5, 6),
    (5, 5): (1, 4),
    (5, 8): (2, 6),
    (6, 2): (1, 3),
    (6, 9): (4, 5),
}


def reference_label(code: str) -> int:
    digits = [int(c) for c in code]
    valid = [digits[i] in CANDIDATES[i] for i in range(6)]
    for (position, digit), targets in RULES.items():
        if digits[position - 1] == digit:
            for target in targets:
                valid[target - 1] = False
    return sum(valid)


def full_rule_program() -> str:
    """The seed's shape with all twelve rules, to check the data is exactly learnable."""
    killers: dict[int, list[str]] = {i: [] for i in range(1, 7)}
    for (position, digit), targets in RULES.items():
        for target in targets:
            killers[target].append(f"p{position} = {digit}")
    terms = []
    for i in range(1, 7):
        allowed = ", ".join(str(d) for d in sorted(CANDIDATES[i - 1]))
        kill = " OR ".join(killers[i])
        terms.append(f"(CASE WHEN p{i} NOT IN ({allowed}) THEN 0 WHEN {kill} THEN 0 ELSE 1 END)")
    digits = ",\n".join(f"CAST(SUBSTRING(code, {i}, 1) AS INTEGER) AS p{i}" for i in range(1, 7))
    body = " + ".join(terms)
    return f"WITH digits AS (SELECT id, {digits} FROM input)\nSELECT id, {body} AS label FROM digits"


def run_accuracy(pack: TaskPack, split_name: str, program: str) -> float:
    """Exact-match accuracy of ``program`` run in DuckDB over the split's inputs, scored by the pack."""
    split = pack.split(split_name)
    con = duckdb.connect(":memory:")
    try:
        con.register("input_frame", split.inputs)
        con.execute("CREATE TABLE input AS SELECT * FROM input_frame").fetchall()
        result = con.execute(program).df()
    finally:
        con.close()
    outputs = dict(zip(result["id"], result[pack.contract.output], strict=True))
    ids = split.ids
    scores = pack.scorer.score([outputs.get(i) for i in ids], [split.expected[i] for i in ids])
    return sum(scores) / len(scores)


@pytest.fixture(scope="module")
def lockpicking() -> TaskPack:
    return load_task("lockpicking6", [TASKS])


@pytest.fixture(scope="module")
def goemotions() -> TaskPack:
    return load_task("goemotions", [TASKS])


# ---------------------------------------------------------------------------------------- the packs


def test_lockpicking_loads(lockpicking: TaskPack) -> None:
    assert lockpicking.dialect == "duckdb"
    assert lockpicking.contract == Contract(output="label", type="INTEGER")
    assert lockpicking.scorer.kind == "exact"
    assert lockpicking.input_columns == {"code": "VARCHAR"}
    assert lockpicking.split_mode == "shared"
    assert lockpicking.allowed_functions == frozenset()
    assert lockpicking.seed_program.startswith("-- lockpicking6 seed")
    assert {name: len(lockpicking.split(name).inputs) for name in ("train", "val", "test")} == {
        "train": 50,
        "val": 50,
        "test": 2000,
    }


def test_goemotions_loads(goemotions: TaskPack) -> None:
    assert goemotions.dialect == "snowflake"
    assert goemotions.contract == Contract(output="labels", type="VARCHAR[]")
    assert isinstance(goemotions.scorer, MultilabelF1Scorer)
    assert goemotions.scorer.separator == ";"
    assert goemotions.allowed_functions == frozenset({"AI_CLASSIFY", "AI_SIMILARITY", "AI_EMBED"})
    assert goemotions.seed_program.count("AI_CLASSIFY(") == 1
    assert goemotions.split_seed == 42
    sizes = {name: len(goemotions.split(name).inputs) for name in ("train", "val", "test")}
    assert sizes == {"train": 306, "val": 594, "test": 600}
    assert goemotions.source["license"] == "Apache-2.0"
    labels = {line.strip() for line in (TASKS / "goemotions" / "seed.sql").read_text().split("'")[1::2]}
    assert len(labels - {"output_mode", "multi"}) == 28


def test_split_shape(goemotions: TaskPack) -> None:
    split = goemotions.split("train")
    assert list(split.inputs.columns) == ["id", "text"]
    assert split.ids == sorted(split.ids)
    assert set(split.expected) == set(split.ids)
    assert all(
        isinstance(v, list) and v and all(isinstance(x, str) for x in v) for v in split.expected.values()
    )
    assert all(isinstance(t, str) for t in split.inputs["text"])
    # handed-out copies cannot corrupt the cache
    split.inputs["text"] = "changed"
    split.expected.clear()
    fresh = goemotions.split("train")
    assert len(fresh.expected) == 306
    assert "changed" not in set(fresh.inputs["text"])


def test_partition_splits_are_disjoint(goemotions: TaskPack) -> None:
    ids = {name: set(goemotions.split(name).ids) for name in ("train", "val", "test")}
    assert not ids["train"] & ids["val"]
    assert not ids["train"] & ids["test"]
    assert not ids["val"] & ids["test"]
    assert len(ids["train"] | ids["val"]) == 900


def test_shared_mode_train_equals_val(lockpicking: TaskPack) -> None:
    train, val, test = (lockpicking.split(n) for n in ("train", "val", "test"))
    assert train.ids == val.ids
    assert train.expected == val.expected
    assert not set(train.ids) & set(test.ids)


def test_unknown_split_is_task_error(lockpicking: TaskPack) -> None:
    with pytest.raises(TaskError, match="no split named 'dev'"):
        lockpicking.split("dev")


def test_split_is_deterministic(goemotions: TaskPack) -> None:
    again = load_task(TASKS / "goemotions")
    for name in ("train", "val", "test"):
        assert again.split(name).ids == goemotions.split(name).ids
    assert again.fingerprint() == goemotions.fingerprint()


def test_partition_ids_seed_and_order() -> None:
    ids = [f"x{i:03d}" for i in range(100)]
    first = partition_ids(ids, 7, 0.3, 0.2)
    assert partition_ids(list(reversed(ids)), 7, 0.3, 0.2) == first
    assert partition_ids(ids, 8, 0.3, 0.2) != first
    assert [len(first[n]) for n in ("train", "val", "test")] == [30, 50, 20]
    assert sorted(first["train"] + first["val"] + first["test"]) == ids


def test_csv_row_order_and_seed(tmp_path: Path, goemotions: TaskPack) -> None:
    root = tmp_path / "goemotions"
    shutil.copytree(TASKS / "goemotions", root)
    pool = pd.read_csv(root / "data" / "pool.csv", dtype=str, keep_default_na=False)
    pool.sample(frac=1.0, random_state=3).to_csv(root / "data" / "pool.csv", index=False)
    shuffled = load_task(root)
    for name in ("train", "val", "test"):
        assert shuffled.split(name).ids == goemotions.split(name).ids
        assert shuffled.split(name).expected == goemotions.split(name).expected
    assert shuffled.fingerprint() != goemotions.fingerprint()

    toml = root / "task.toml"
    toml.write_text(toml.read_text().replace("seed = 42", "seed = 43"))
    reseeded = load_task(root)
    assert reseeded.split_seed == 43
    assert reseeded.split("train").ids != goemotions.split("train").ids
    assert len(reseeded.split("train").ids) == 306


def test_lockpicking_labels_match_reference(lockpicking: TaskPack) -> None:
    for name in ("train", "test"):
        split = lockpicking.split(name)
        codes = dict(zip(split.inputs["id"], split.inputs["code"], strict=True))
        assert all(re.fullmatch(r"\d{6}", c) for c in codes.values())
        assert {i: reference_label(c) for i, c in codes.items()} == split.expected
    assert lockpicking.split("train").ids[:2] == ["lp001", "lp002"]
    assert lockpicking.split("test").ids[0] == "lt0001"


def test_lockpicking_seed_is_weak_and_full_rules_are_perfect(lockpicking: TaskPack) -> None:
    assert run_accuracy(lockpicking, "train", lockpicking.seed_program) < 0.6
    assert run_accuracy(lockpicking, "test", lockpicking.seed_program) < 0.6
    program = full_rule_program()
    assert run_accuracy(lockpicking, "train", program) == 1.0
    assert run_accuracy(lockpicking, "test", program) == 1.0


def test_lockpicking_pack_names_only_the_first_rule() -> None:
    hidden = [(p, d) for (p, d) in RULES if (p, d) != (1, 4)]
    patterns = []
    for position, digit in hidden:
        patterns += [
            rf"\bp\s*{position}\s*(=|==|:|is)\s*{digit}\b",
            rf"\bposition\s*{position}\s*(=|==|:|is)\s*{digit}\b",
            rf"\b{digit}\s+(at|in)\s+(position\s*|p\s*){position}\b",
        ]
    regex = re.compile("|".join(patterns), re.IGNORECASE)
    checked = 0
    for path in (TASKS / "lockpicking6").rglob("*"):
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            match = regex.search(text)
            assert match is None, f"{path} reveals a hidden rule: {match.group(0)!r}"
            checked += 1
    assert checked >= 5
    readme = (TASKS / "lockpicking6" / "README.md").read_text()
    assert re.search(r"P1\s*=\s*4", readme)


def test_list_tasks_and_missing_task(tmp_path: Path) -> None:
    names = [info.name for info in list_tasks([TASKS])]
    folders = sorted(p.name for p in TASKS.iterdir() if (p / "task.toml").is_file())
    assert names == folders  # every pack folder, in order, each loaded
    assert {"dabstep", "goemotions", "hotpotqa_type", "jaffle_shop", "lockpicking6", "tsp_construct"} <= set(
        names
    )
    assert all(info.pack is not None and info.error is None for info in list_tasks([TASKS]))
    with pytest.raises(
        TaskError,
        match=rf"^no task named 'nope' \(known: {', '.join(folders)}\)$",
    ):
        load_task("nope", [TASKS])
    with pytest.raises(TaskError, match="no task pack here"):
        load_task(tmp_path / "nowhere")


def test_default_search_paths_include_repo_tasks() -> None:
    resolved = [p.resolve() for p in default_search_paths()]
    assert TASKS.resolve() in resolved
    assert len(resolved) == len(set(resolved))


# ------------------------------------------------------------------------------------------- scorers


def test_exact_scorer() -> None:
    scorer = ExactScorer(type_="INTEGER")
    assert scorer.score([3, "3", 3.0, 2, None, "x", 3.5], [3] * 7) == [1, 1, 1, 0, 0, 0, 0]
    strings = ExactScorer(type_="VARCHAR")
    assert strings.score(["a", "A", " a", None], ["a", "a", "a", "a"]) == [1, 0, 0, 0]
    lists = ExactScorer(type_="VARCHAR[]")
    assert lists.score([["a", "b"], "a;b", '["a","b"]', ["b", "a"]], [["a", "b"]] * 4) == [1, 1, 1, 0]
    booleans = ExactScorer(type_="BOOLEAN")
    assert booleans.score([True, "false", 1, None], [True, False, True, False]) == [1, 1, 1, 0]


def test_numeric_scorer() -> None:
    scorer = NumericScorer(abs_tol=0.01, rel_tol=0.1)
    # tolerance for expected 100 is 0.01 + 10 = 10.01; for expected 0 it is 0.01
    assert scorer.score([110, 111, "0.005", 0.02, None, "abc"], [100, 100, 0, 0, 1, 1]) == [1, 0, 1, 0, 0, 0]


def test_multilabel_f1_scorer() -> None:
    scorer = MultilabelF1Scorer(separator=";")
    outputs = [["joy"], ["joy", "love"], " Joy ; LOVE ", '["joy"]', [], [], None, ["anger"]]
    expected = [["joy"], ["joy"], ["joy", "love"], ["joy", "love"], [], ["joy"], ["joy"], ["joy"]]
    assert scorer.score(outputs, expected) == pytest.approx([1, 2 / 3, 1, 2 / 3, 1, 0, 0, 0])


def test_token_match_scorer() -> None:
    scorer = TokenMatchScorer()
    outputs = ["The Eiffel Tower!", "eiffel", "tower of paris", "", "", None, "Paris"]
    expected = ["eiffel tower", "eiffel tower", "the tower", "", "a", "x", "London"]
    # 'eiffel' vs 'eiffel tower': p=1, r=1/2 -> 2/3; 'tower of paris' vs 'tower': p=1/3, r=1 -> 1/2
    assert scorer.score(outputs, expected) == pytest.approx([1, 2 / 3, 1 / 2, 1, 1, 0, 0])


def test_sql_scorer() -> None:
    scorer = SqlScorer(expression="1 - abs(output - expected) / 10.0", type_="DOUBLE")
    scorer.validate()
    assert scorer.score([5, 8, -100, None, "junk"], [5, 5, 0, 5, 5]) == pytest.approx([1, 0.7, 0, 0, 0])
    clamp = SqlScorer(expression="output * 2", type_="INTEGER")
    assert clamp.score([1, 0, -3], [0, 0, 0]) == [1, 0, 0]
    lists = SqlScorer(
        expression="CASE WHEN list_has_all(output, expected) THEN 1 ELSE 0 END", type_="VARCHAR[]"
    )
    assert lists.score([["a", "b"], ["a"]], [["a"], ["b"]]) == [1, 0]
    for bad in ("output +", "sum(output)", "nope(output)", "1; DROP TABLE x"):
        with pytest.raises(ValueError):
            SqlScorer(expression=bad, type_="DOUBLE").validate()


def test_scorers_reject_length_mismatch() -> None:
    with pytest.raises(ValueError):
        ExactScorer(type_="INTEGER").score([1], [1, 2])


def test_coerce_output() -> None:
    assert coerce_output("007", "INTEGER") == 7
    assert coerce_output(4.0, "INTEGER") == 4
    assert coerce_output(float("nan"), "INTEGER") is None
    assert coerce_output(None, "VARCHAR[]") is None
    assert coerce_output("1e3", "DOUBLE") == 1000.0
    assert coerce_output(12, "VARCHAR") == "12"
    assert coerce_output("T", "BOOLEAN") is True
    assert coerce_output('["a", "b"]', "VARCHAR[]") == ["a", "b"]
    assert coerce_output("a; b;", "VARCHAR[]") == ["a", "b"]
    for value, type_ in (
        (4.5, "INTEGER"),
        (True, "INTEGER"),
        ("x", "DOUBLE"),
        ("maybe", "BOOLEAN"),
        ({}, "VARCHAR"),
    ):
        with pytest.raises(ValueError):
            coerce_output(value, type_)
    with pytest.raises(ValueError):
        coerce_output(1, "DATE")


# ------------------------------------------------------------------------------------ malformed packs

MINI_TOML = """\
name = "mini"
description = "a tiny pack for tests"

[data]
pool = "pool.csv"
expected_column = "y"

[data.input_columns]
x = "INTEGER"
s = "VARCHAR"

[splits]
seed = 1
train_fraction = 0.5
test_fraction = 0.2

[contract]
output = "y"
type = "INTEGER"

[scorer]
kind = "exact"

[program]
seed = "seed.sql"
"""

MINI_POOL = "id,x,s,y\n" + "".join(f"r{i:02d},{i},{'0' * (i % 3)}{i},{i * 2}\n" for i in range(10))


def make_pack(tmp_path: Path, toml: str = MINI_TOML, pool: str = MINI_POOL) -> Path:
    root = tmp_path / "mini"
    root.mkdir(parents=True)
    (root / "task.toml").write_text(toml)
    (root / "pool.csv").write_text(pool)
    (root / "seed.sql").write_text("SELECT id, x * 2 AS y FROM input\n")
    return root


def test_mini_pack_loads(tmp_path: Path) -> None:
    pack = load_task(make_pack(tmp_path))
    sizes = [len(pack.split(n).inputs) for n in ("train", "val", "test")]
    assert sizes == [5, 3, 2]
    everything = pd.concat([pack.split(n).inputs for n in ("train", "val", "test")])
    assert sorted(everything["id"]) == [f"r{i:02d}" for i in range(10)]
    assert set(everything["s"]) >= {"01", "002", "005"}  # VARCHAR kept verbatim (leading zeros)
    assert pd.api.types.is_integer_dtype(everything["x"])
    assert run_accuracy(pack, "val", pack.seed_program) == 1.0
    (make_pack(tmp_path / "other") / "pool.csv").write_text(MINI_POOL.replace("r09,9,9,18", "r09,9,9,19"))
    assert load_task(tmp_path / "other" / "mini").fingerprint() != pack.fingerprint()


MALFORMED = [
    ("bad toml", lambda t: t.replace('name = "mini"', 'name = "mini'), None, r"task\.toml: invalid TOML: "),
    (
        "unknown key",
        lambda t: t.replace('pool = "pool.csv"', 'pool = "pool.csv"\npoool = 1'),
        None,
        "'data.poool'",
    ),
    ("unknown section", lambda t: t + "\n[extra]\na = 1\n", None, r"key 'extra': unknown key"),
    (
        "missing key",
        lambda t: t.replace('expected_column = "y"\n', ""),
        None,
        "'data.expected_column': missing",
    ),
    (
        "missing section",
        lambda t: t.replace('[contract]\noutput = "y"\ntype = "INTEGER"\n', ""),
        None,
        "'contract'",
    ),
    ("wrong type", lambda t: t.replace("seed = 1", 'seed = "one"'), None, "'splits.seed': expected integer"),
    ("bool as int", lambda t: t.replace("seed = 1", "seed = true"), None, "'splits.seed': expected integer"),
    (
        "bad scorer kind",
        lambda t: t.replace('kind = "exact"', 'kind = "bogus"'),
        None,
        r"key 'scorer\.kind': must be one of exact, numeric, multilabel_f1, token_match, sql, bound_ratio \(got 'bogus'\)",
    ),
    (
        "scorer key for other kind",
        lambda t: t.replace('"exact"', '"exact"\nabs_tol = 1'),
        None,
        "'scorer.abs_tol'",
    ),
    ("bad contract type", lambda t: t.replace('type = "INTEGER"', 'type = "DATE"'), None, "'contract.type'"),
    (
        "missing data file",
        lambda t: t.replace('"pool.csv"', '"nope.csv"'),
        None,
        r"'data\.pool': file not found: .*nope",
    ),
    (
        "path escape",
        lambda t: t.replace('"pool.csv"', '"../pool.csv"'),
        None,
        "'data.pool': must be a relative path",
    ),
    (
        "fraction",
        lambda t: t.replace("train_fraction = 0.5", "train_fraction = 1.5"),
        None,
        "'splits.train_fraction'",
    ),
    (
        "no val left",
        lambda t: t.replace("train_fraction = 0.5", "train_fraction = 0.8"),
        None,
        "'splits.train_fraction'",
    ),
    ("name mismatch", lambda t: t.replace('name = "mini"', 'name = "other"'), None, "key 'name'"),
    ("bad duckdb type", lambda t: t.replace('x = "INTEGER"', 'x = "INTEGR"'), None, "'data.input_columns.x'"),
    ("label as input", lambda t: t.replace('s = "VARCHAR"', 'y = "VARCHAR"'), None, "'data.input_columns.y'"),
    (
        "bad sql scorer",
        lambda t: t.replace('kind = "exact"', 'kind = "sql"\nexpression = "output +"'),
        None,
        "'scorer.expression': invalid SQL expression",
    ),
    (
        "missing column",
        lambda t: t.replace('s = "VARCHAR"', 'z = "VARCHAR"'),
        None,
        r"pool\.csv: missing column 'z'",
    ),
    (
        "unparseable expected",
        None,
        MINI_POOL.replace("r03,3,3,6", "r03,3,3,six"),
        r"pool\.csv: id 'r03': .*INTEGER",
    ),
    ("unparseable input", None, MINI_POOL.replace("r04,4,04,8", "r04,four,04,8"), r"id 'r04': column 'x'"),
    ("duplicate id", None, MINI_POOL.replace("r05,", "r04,"), r"pool\.csv: duplicate id 'r04'"),
    (
        "huge timeout",  # a thread's timer overflowed on it, and the candidate then ran without a deadline
        lambda t: t + "timeout_seconds = 1e308\n",
        None,
        r"key 'program\.timeout_seconds': must be a number in \(0, 3600\] \(got 1e\+308\)",
    ),
    (
        "run option a pack may not set",  # the seed, budget and spend are the user's
        lambda t: t + "\n[run]\nseed = 3\n",
        None,
        r"key 'run\.seed': unknown key \(allowed: islands, policy, .*minibatch",
    ),
    (
        "run option out of range",
        lambda t: t + "\n[run]\nminibatch = -2\n",
        None,
        r"key 'run\.minibatch': must be an integer in \[0, 1000000\] \(got -2\)",
    ),
    (
        "negative split seed",
        lambda t: t.replace("seed = 1", "seed = -1"),
        None,
        r"key 'splits\.seed': must be an integer in \[0, 2147483647\] \(got -1\)",
    ),
]


@pytest.mark.parametrize(("case", "edit_toml", "pool", "pattern"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_pack(tmp_path: Path, case: str, edit_toml, pool: str | None, pattern: str) -> None:
    toml = edit_toml(MINI_TOML) if edit_toml else MINI_TOML
    root = make_pack(tmp_path, toml, pool if pool is not None else MINI_POOL)
    with pytest.raises(TaskError) as info:
        load_task(root)
    message = str(info.value)
    assert "\n" not in message, message
    assert re.search(pattern, message), message
    assert "task.toml" in message or "pool.csv" in message, message
    assert "key '" in message or "invalid TOML" in message, message


def test_list_tasks_reports_broken_pack(tmp_path: Path) -> None:
    make_pack(tmp_path, MINI_TOML.replace('kind = "exact"', 'kind = "bogus"'))
    shutil.copytree(TASKS / "lockpicking6", tmp_path / "lockpicking6")
    infos = list_tasks([tmp_path])
    assert [i.name for i in infos] == ["lockpicking6", "mini"]
    assert infos[0].pack is not None and infos[0].error is None
    assert infos[1].pack is None and infos[1].error is not None and "scorer.kind" in infos[1].error
    assert infos[0].description == infos[0].pack.description
    assert infos[1].description.startswith("(broken: ") and infos[1].source == {}


@pytest.mark.parametrize("linked", ["pool.csv", "seed.sql", "data"])
def test_a_pack_file_that_is_a_symbolic_link_is_refused(tmp_path: Path, linked: str) -> None:
    """A pack's files are inside it: a link (or a folder on the way that is one) could make a pack read any file
    on the machine, and its fingerprint would not cover what the link points to."""
    outside = tmp_path / "outside"
    outside.mkdir()
    toml = MINI_TOML.replace('pool = "pool.csv"', 'pool = "data/pool.csv"')
    root = make_pack(tmp_path / "packs", toml)
    (root / "data").mkdir()
    (root / "pool.csv").rename(root / "data" / "pool.csv")
    assert len(load_task(root).split("train")) == 5  # as written, the pack loads
    if linked == "data":
        shutil.move(root / "data", outside / "data")
        (root / "data").symlink_to(outside / "data", target_is_directory=True)
        key = "data.pool"
    else:
        where = root / "data" / "pool.csv" if linked == "pool.csv" else root / "seed.sql"
        shutil.move(where, outside / linked)
        where.symlink_to(outside / linked)
        key = "data.pool" if linked == "pool.csv" else "program.seed"
    with pytest.raises(TaskError) as info:
        load_task(root)
    message = str(info.value)
    assert "\n" not in message and f"key '{key}'" in message and "is a symbolic link" in message, message


def test_a_packs_run_table_sets_what_a_run_leaves_unset(tmp_path: Path) -> None:
    """`[run]` holds the pack's recommended search options: a run that does not set them gets them (stored in
    the run's config), a run that sets one keeps its own, the command line's flag included."""
    from coco_sql import api, cli
    from coco_sql.engines.duckdb.store import DuckDBStore

    root = make_pack(tmp_path, MINI_TOML + "\n[run]\nminibatch = 2\nislands = 1\n")
    assert dict(load_task(root).run_defaults) == {"minibatch": 2, "islands": 1}

    def stored(db: Path) -> dict:
        with DuckDBStore(db, read_only=True) as store:
            return store.get_run(store.latest_run_id(None)).config

    api.evolve(root, db=tmp_path / "a.duckdb", budget=1, options={"seed": 1})
    assert (stored(tmp_path / "a.duckdb")["minibatch"], stored(tmp_path / "a.duckdb")["islands"]) == (2, 1)
    api.evolve(root, db=tmp_path / "b.duckdb", budget=1, options={"seed": 1, "minibatch": 0})
    assert (stored(tmp_path / "b.duckdb")["minibatch"], stored(tmp_path / "b.duckdb")["islands"]) == (0, 1)
    for flags, expected in (((), 2), (("--minibatch", "0"), 0)):
        db = tmp_path / f"cli{len(flags)}.duckdb"
        argv = ["evolve", str(root), "--budget", "1", "--seed", "1", "--db", str(db), "--quiet", *flags]
        assert cli.run(argv) == 0
        assert stored(db)["minibatch"] == expected
