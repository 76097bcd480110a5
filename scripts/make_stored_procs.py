"""Write the repository's top-level stored_procs/: what a user deploys to Snowflake, one SQL file per procedure
(after 00_setup.sql: the stage, the tables and views) and the procedures' Snowpark handlers.

The files are generated from the package (`coco_sql.engines.snowflake.procs.deploy.repository_files`), so they always equal
what `coco-sql deploy --print` prints; `tests/test_deploy.py` fails when they are stale.

Usage: python scripts/make_stored_procs.py [--out stored_procs]   (or: make stored-procs)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from coco_sql.engines.snowflake.procs.deploy import REPOSITORY_FOLDER, repository_files  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=REPO / REPOSITORY_FOLDER)
    args = parser.parse_args()
    files = repository_files()
    args.out.mkdir(parents=True, exist_ok=True)
    for stale in args.out.iterdir():
        if stale.is_file() and stale.name not in files:
            stale.unlink()
    for name, text in files.items():
        (args.out / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(files)} files to {args.out}")


if __name__ == "__main__":
    main()
