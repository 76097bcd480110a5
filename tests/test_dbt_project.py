"""A dbt project's one-text form: canonical, round-trips, refuses paths and sizes a program may not have."""

from __future__ import annotations

from pathlib import Path

import pytest

from coco_sql.errors import CandidateRejected
from coco_sql.languages.dbt.project import DbtProject, Limits, diff_projects

REPO = Path(__file__).resolve().parents[1]
FILES = {
    "models/staging/stg_orders.sql": "select id as order_id\r\nfrom {{ source('shop', 'orders') }}\r\n\r\n\r\n",
    "dbt_project.yml": "\ufeffname: shop\nconfig-version: 2",
    "models/sources.yml": "version: 2\nsources:\n  - name: shop\n    tables:\n      - name: orders\n",
    "macros/cents.sql": "{% macro cents(x) %}{{ x }} / 100{% endmacro %}\n",
    "models/docs.md": "",
}


def test_text_form_is_sorted_canonical_and_round_trips() -> None:
    project = DbtProject.of(FILES)
    text = project.to_text()
    assert text == (
        "-- file: dbt_project.yml\nname: shop\nconfig-version: 2\n"
        "-- file: macros/cents.sql\n{% macro cents(x) %}{{ x }} / 100{% endmacro %}\n"
        "-- file: models/docs.md\n"
        "-- file: models/sources.yml\nversion: 2\nsources:\n  - name: shop\n    tables:\n      - name: orders\n"
        "-- file: models/staging/stg_orders.sql\nselect id as order_id\nfrom {{ source('shop', 'orders') }}\n"
    )
    assert DbtProject.from_text(text) == project
    assert DbtProject.from_text(text).to_text() == text
    # the same files in another order, with other newlines, are the same program
    shuffled = {p: c.replace("\r\n", "\n").replace("\n", "\r\n") for p, c in reversed(list(FILES.items()))}
    assert DbtProject.of(shuffled).to_text() == text
    assert hash(DbtProject.of(shuffled)) == hash(project)


def test_every_committed_pack_project_round_trips() -> None:
    for folder in ("jaffle_shop/seed", "jaffle_shop/solution", "goemotions_dbt/seed"):
        project = DbtProject.from_dir(REPO / "tasks" / folder)
        assert DbtProject.from_text(project.to_text()) == project
        assert "dbt_project.yml" in project.files and project.models()


def test_a_non_canonical_text_is_made_canonical() -> None:
    text = "\n\n-- file: models/a.sql\nselect 1 as x\n\n\n-- file: dbt_project.yml\r\nname: shop\r\n"
    project = DbtProject.from_text(text)
    assert project.to_text() == "-- file: dbt_project.yml\nname: shop\n-- file: models/a.sql\nselect 1 as x\n"


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"/etc/passwd": "x"}, r"^file path '/etc/passwd' must be relative"),
        ({"models/../x.sql": "x"}, r"^file path 'models/\.\./x\.sql' has a bad part '\.\.'"),
        ({"models/.hidden.sql": "x"}, r"has a bad part '\.hidden\.sql'"),
        ({"models\\a.sql": "x"}, r"must be relative and use '/'"),
        ({"seeds/raw.csv": "x"}, r"^file path 'seeds/raw\.csv' is not part of a dbt program"),
        ({"macros/m.txt": "x"}, r"is not part of a dbt program"),
        ({"dbt_packages/p/models/m.sql": "x"}, r"is not part of a dbt program"),
        ({"models/a.py": "x"}, r"is not part of a dbt program"),
        ({"profiles.yml": "x"}, r"is not part of a dbt program"),
        (
            {"models/a.sql": "x\n-- file: models/b.sql\n"},
            r"^models/a\.sql line 2: a line may not start with '-- file:'",
        ),
        ({"models/a.sql": "a\x00b"}, r"NUL character"),
    ],
)
def test_paths_and_contents_a_program_may_not_hold(files: dict[str, str], message: str) -> None:
    with pytest.raises(CandidateRejected, match=message):
        DbtProject.of({"dbt_project.yml": "name: shop\n", **files})


def test_limits_and_malformed_texts() -> None:
    with pytest.raises(CandidateRejected, match=r"^the project has no dbt_project\.yml"):
        DbtProject.of({"models/a.sql": "select 1 as x"})
    small = Limits(max_files=2, max_file_bytes=50, max_total_bytes=80)
    with pytest.raises(CandidateRejected, match=r"^the project has 3 files; at most 2 allowed$"):
        DbtProject.of({"dbt_project.yml": "", "models/a.sql": "", "models/b.sql": ""}, small)
    with pytest.raises(
        CandidateRejected, match=r"^models/a\.sql: 60 bytes is over the limit of 50 per file$"
    ):
        DbtProject.of({"dbt_project.yml": "", "models/a.sql": "x" * 59}, small)
    with pytest.raises(CandidateRejected, match=r"^the project has 82 bytes; at most 80 allowed$"):
        DbtProject.of({"dbt_project.yml": "y" * 40, "models/a.sql": "x" * 40}, small)
    with pytest.raises(CandidateRejected, match=r"^line 1: text before the first '-- file:' line"):
        DbtProject.from_text("select 1\n-- file: dbt_project.yml\n")
    with pytest.raises(CandidateRejected, match=r"^line 3: file 'dbt_project\.yml' appears twice"):
        DbtProject.from_text("-- file: dbt_project.yml\nname: a\n-- file: dbt_project.yml\n")
    with pytest.raises(CandidateRejected, match=r"^empty project text"):
        DbtProject.from_text("\n \n")


def test_diff_is_per_file() -> None:
    old = DbtProject.of(FILES)
    new = old.replace(
        {
            "models/staging/stg_orders.sql": "select id as order_id, amount / 100 as amount\n"
            "from {{ source('shop', 'orders') }}\n",
            "models/docs.md": None,
            "models/orders.sql": "select * from {{ ref('stg_orders') }}\n",
        }
    )
    diffs = diff_projects(old, new)
    assert [(d.path, d.status) for d in diffs] == [
        ("models/docs.md", "removed"),
        ("models/orders.sql", "added"),
        ("models/staging/stg_orders.sql", "changed"),
    ]
    changed = diffs[2].unified
    assert changed.startswith("--- a/models/staging/stg_orders.sql\n+++ b/models/staging/stg_orders.sql\n")
    assert "-select id as order_id\n+select id as order_id, amount / 100 as amount\n" in changed
    assert diff_projects(new, new) == []
