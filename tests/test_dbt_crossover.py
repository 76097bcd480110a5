"""Crossover of edits (issue 39): two partial fixes made by different children of one project are combined, and
two edits of one model at once (defects that hide each other in one column gain only together)."""

from __future__ import annotations

from coco_sql.languages.dbt.crossover import merge, merges, pairs
from coco_sql.languages.dbt.edits import Edit
from coco_sql.languages.dbt.project import DbtProject

ROOT = DbtProject.of({
    "dbt_project.yml": "name: shop\n",
    "models/stg.sql": "select id, amount as amount\nfrom {{ source('s', 't') }}\n",
    "models/mart.sql": "select\n  a + b as x,\n  c as y\nfrom {{ ref('stg') }}\njoin u on t.id = u.oid\n",
})  # fmt: skip


def _edited(path: str, old: str, new: str, base: DbtProject = ROOT) -> DbtProject:
    return base.replace({path: base.files[path].replace(old, new)})


def test_two_children_fixing_different_files_and_lines_merge() -> None:
    unit = _edited("models/stg.sql", "amount as amount", "amount / 100 as amount")
    operator = _edited("models/mart.sql", "a + b", "a * b")
    key = _edited("models/mart.sql", "u.oid", "u.id", operator)  # the parent: two lines of mart changed
    merged = merge(ROOT, key, unit)
    assert merged is not None
    assert merged.files["models/stg.sql"] == unit.files["models/stg.sql"]
    assert merged.files["models/mart.sql"] == key.files["models/mart.sql"]
    found = merges(key.to_text(), [unit.to_text(), key.to_text()], ROOT.to_text())
    assert [e.code for e in found] == [merged.to_text()]  # the parent itself adds nothing


def test_an_edit_of_a_line_the_parent_changed_too_is_not_taken() -> None:
    mine = _edited("models/mart.sql", "a + b", "a * b")
    theirs = _edited("models/mart.sql", "a + b", "a - b")
    assert merge(ROOT, mine, theirs) is None


def test_pairs_of_the_heaviest_single_edits() -> None:
    operator = Edit("operator", _edited("models/mart.sql", "a + b", "a * b").to_text(), 2.0)
    key = Edit("key", _edited("models/mart.sql", "u.oid", "u.id").to_text(), 1.5)
    found = pairs(ROOT.to_text(), [operator, key])
    assert len(found) == 1 and found[0].weight == 0.8 * 1.5
    both = DbtProject.from_text(found[0].code).files["models/mart.sql"]
    assert "a * b" in both and "u.id" in both and "u.oid" not in both
