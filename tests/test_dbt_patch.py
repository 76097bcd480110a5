"""A minimal patch (issue 39): an accepted edit changes only its tokens, and `export --form dbt_patch` is a
unified diff that `git apply` takes in the user's folder, whatever its line ends and final newline.

- a repair of a model with a multi-line config(), comments and a ``::numeric(16,2)`` cast changes one line;
- the patch applies with ``git apply`` to files with CRLF line ends, trailing blank lines and no final newline,
  and the folder then holds exactly the champion's text (up to those conventions); an added file is new.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from coco_sql.languages.dbt.edits import hypotheses
from coco_sql.languages.dbt.evidence import Evidence
from coco_sql.languages.dbt.patch import dbt_patch
from coco_sql.languages.dbt.project import DbtProject, normalise

MODEL = """{{
    config(
        materialized='table',
        tags=['finance'],
    )
}}

-- payments in dollars
select
    id as payment_id,
    amount::numeric(16,2) as amount,  -- cents in the raw table
    case when method = 'cc' then 'credit_card' else method end as method
from {{ source('shop', 'payments') }}
where amount > 0
"""


def test_a_repair_changes_only_its_tokens() -> None:
    project = DbtProject.of({"dbt_project.yml": "name: shop\n", "models/payments.sql": MODEL})
    wanted = '{"amount": 1.0, "method": "credit_card"}'
    ids, outputs, expected = [], [], []
    for k in range(5):
        ids.append(f"payments:{k}")
        outputs.append(f'{{"amount": {100.0 * (k + 1)}, "method": "credit_card"}}')
        expected.append(wanted.replace("1.0", str(float(k + 1))))
    edits = hypotheses(project, None, Evidence.of(ids, outputs, expected), "duckdb", targets=["payments"])
    scale = next(e for e in edits if e.approach.startswith("scale payments.amount"))
    after = DbtProject.from_text(scale.code).files["models/payments.sql"]
    changed = [(a, b) for a, b in zip(MODEL.splitlines(), after.splitlines(), strict=True) if a != b]
    assert changed == [
        ("    amount::numeric(16,2) as amount,  -- cents in the raw table",
         "    (amount::numeric(16,2)) / 100 as amount,  -- cents in the raw table")
    ]  # fmt: skip


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_patch_applies_with_git_to_the_folder_as_written(tmp_path: Path) -> None:
    written = {
        "dbt_project.yml": "name: shop\n",
        "models/a.sql": "select 1 as x\r\nfrom t\r\nwhere y > 0\r\n",  # CRLF
        "models/b.sql": "select 2 as x\nfrom t\nwhere y > 0",  # no final newline
        "models/c.sql": "select 3 as x\nfrom t\nwhere y > 0\n\n\n",  # trailing blank lines
    }
    for path, text in written.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_bytes(text.encode())
    seed = DbtProject.from_dir(tmp_path)
    champion = seed.replace(
        {path: seed.files[path].replace("y > 0", "y >= 0") for path in written if "/" in path}
    )
    champion = champion.replace({"models/d.sql": "select 4 as x\n"})
    task = SimpleNamespace(seed_program=seed.to_text(), kind_data=SimpleNamespace(seed_dir=tmp_path))
    patch = dbt_patch(champion.to_text(), task)
    assert patch.count("diff --git") == 4 and "new file mode" in patch
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "fix.patch").write_text(patch)
    subprocess.run(["git", "apply", "--check", "fix.patch"], cwd=tmp_path, check=True)
    subprocess.run(["git", "apply", "fix.patch"], cwd=tmp_path, check=True)
    assert (tmp_path / "models/a.sql").read_bytes() == b"select 1 as x\r\nfrom t\r\nwhere y >= 0\r\n"
    assert (tmp_path / "models/b.sql").read_text() == "select 2 as x\nfrom t\nwhere y >= 0"
    assert (tmp_path / "models/c.sql").read_text() == "select 3 as x\nfrom t\nwhere y >= 0\n\n\n"
    after = DbtProject.from_dir(tmp_path)
    assert {p: normalise(t) for p, t in after.files.items()} == dict(champion.files)
