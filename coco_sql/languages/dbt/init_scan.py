"""What `coco-sql init dbt` reads of a dbt project folder as it stands: its name, models and their refs, the
seeds, the declared sources and where their rows are, the packages present, and the data tests that name keys.

Nothing here runs dbt or the project's Jinja: YAML is read with the safe loader, refs and sources with the same
patterns the repair mutator uses, and the profile only for the path of a DuckDB file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from coco_sql.errors import TaskError
from coco_sql.languages.dbt.project import PROJECT_FILE, DbtProject

SEED_SOURCE = (
    "dbt_seeds"  # the source name a project's seeds take in the task (`ref('x')` of seed x reads it)
)
_SOURCE = re.compile(r"""\bsource\(\s*['"](\w+)['"]\s*,\s*['"](\w+)['"]\s*\)""")
_REF = re.compile(r"""\bref\(\s*(?:['"]\w+['"]\s*,\s*)?['"](\w+)['"]""")


@dataclass
class DeclaredSource:
    source: str
    table: str
    schema: str
    identifier: str


@dataclass
class ProjectScan:
    """A project folder, read: see the module docstring."""

    root: Path
    name: str
    project: DbtProject
    refs: dict[str, set[str]]  # model -> the models and seeds it refs
    reads: dict[str, set[str]]  # model -> the task sources it reads ("source.table", seeds as dbt_seeds.x)
    seeds: dict[str, Path]  # seed name -> its CSV file
    sources: list[DeclaredSource]
    database: Path | None  # the profile's DuckDB file, when it has one
    packages: list[str]  # folders under dbt_packages/
    unique: dict[str, list[tuple[str, ...]]] = field(default_factory=dict)  # model -> keys its tests name
    relationships: list[tuple[str, str, str, str]] = field(default_factory=list)  # (model, column, to, field)

    def upstream(self, model: str) -> set[str]:
        """The models `model` reads, itself included."""
        seen: set[str] = set()
        stack = [model]
        while stack:
            name = stack.pop()
            if name in seen or name not in self.refs:
                continue
            seen.add(name)
            stack.extend(self.refs[name])
        return seen

    def sources_of(self, model: str) -> set[str]:
        return set().union(*(self.reads.get(m, set()) for m in self.upstream(model)))


def scan(root: Path) -> ProjectScan:
    """Read the project at `root`; TaskError (one line) when it is not a dbt project this can read."""
    if not (root / PROJECT_FILE).is_file():
        raise TaskError(f"{root}: not a dbt project folder ({PROJECT_FILE} not found)")
    settings = _yaml(root / PROJECT_FILE) or {}
    for key, default in (("model-paths", ["models"]), ("macro-paths", ["macros"])):
        value = settings.get(key) or settings.get(key.replace("model", "source")) or default
        if list(value) != default:
            raise TaskError(
                f"{root / PROJECT_FILE}: {key} {value!r}: coco-sql reads models/ and macros/ only"
            )
    try:
        project = DbtProject.from_dir(root)
    except Exception as error:  # a file a program may not hold, or over a limit: one line naming it
        raise TaskError(f"{root}: {error}") from None
    seed_dirs = settings.get("seed-paths") or settings.get("data-paths") or ["seeds"]
    seeds = {p.stem: p for d in seed_dirs for p in sorted((root / d).rglob("*.csv")) if (root / d).is_dir()}
    refs = {m: set(_REF.findall(project.files[p])) for m, p in project.models().items()}
    reads = {
        m: {f"{s}.{t}" for s, t in _SOURCE.findall(project.files[p])}
        | {f"{SEED_SOURCE}.{r}" for r in refs[m] if r in seeds}
        for m, p in project.models().items()
    }
    found = ProjectScan(root, str(settings.get("name", root.name)), project,
                        {m: {r for r in rs if r not in seeds} for m, rs in refs.items()}, reads, seeds, [],
                        _database(root, settings), sorted(p.name for p in (root / "dbt_packages").iterdir())
                        if (root / "dbt_packages").is_dir() else [])  # fmt: skip
    for path in project.paths("models/", ".yml"):
        _properties(found, _yaml_text(path, project.files[path]) or {})
    return found


def _yaml(path: Path) -> Any:
    return _yaml_text(str(path), path.read_text(encoding="utf-8"))


def _yaml_text(where: str, text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise TaskError(f"{where}: YAML does not parse: {' '.join(str(error).split())[:160]}") from None


def _database(root: Path, settings: dict[str, Any]) -> Path | None:
    """The DuckDB file of the profile the project names (profiles.yml beside it; its default target)."""
    profiles = root / "profiles.yml"
    if not profiles.is_file():
        return None
    document = _yaml(profiles) or {}
    profile = document.get(settings.get("profile")) if isinstance(document, dict) else None
    if not isinstance(profile, dict):
        return None
    outputs = profile.get("outputs") or {}
    target = outputs.get(profile.get("target")) or next(iter(outputs.values()), None)
    path = target.get("path") if isinstance(target, dict) else None
    if not isinstance(path, str) or path == ":memory:" or "{{" in path or path.startswith("md:"):
        return None
    resolved = Path(path) if Path(path).is_absolute() else root / path
    return resolved if resolved.is_file() else None


def _properties(found: ProjectScan, document: dict[str, Any]) -> None:
    """Sources, and the tests that name keys (unique + not_null columns, unique_combination_of_columns,
    relationships), of one models/*.yml document."""
    for source in document.get("sources") or []:
        if not isinstance(source, dict):
            continue
        for table in source.get("tables") or []:
            if isinstance(table, dict) and "name" in table:
                found.sources.append(DeclaredSource(str(source.get("name")), str(table["name"]),
                                                    str(source.get("schema") or source.get("name")),
                                                    str(table.get("identifier") or table["name"])))  # fmt: skip
    for model in document.get("models") or []:
        if not isinstance(model, dict) or "name" not in model:
            continue
        name = str(model["name"])
        for test in (model.get("tests") or []) + (model.get("data_tests") or []):
            body = next(iter(test.values()), None) if isinstance(test, dict) and len(test) == 1 else None
            kind = next(iter(test), "") if isinstance(test, dict) else test
            if (
                isinstance(kind, str)
                and kind.endswith("unique_combination_of_columns")
                and isinstance(body, dict)
            ):
                columns = (body.get("arguments") or body).get("combination_of_columns") or []
                if columns:
                    found.unique.setdefault(name, []).append(tuple(map(str, columns)))
        for column in model.get("columns") or []:
            if not isinstance(column, dict) or "name" not in column:
                continue
            tests = (column.get("tests") or []) + (column.get("data_tests") or [])
            kinds = {
                t if isinstance(t, str) else next(iter(t), "") for t in tests if isinstance(t, str | dict)
            }
            if "unique" in kinds:
                found.unique.setdefault(name, []).insert(0, (str(column["name"]),))
            for test in tests:
                body = test.get("relationships") if isinstance(test, dict) else None
                if isinstance(body, dict):
                    args = body.get("arguments") or body
                    found.relationships.append(
                        (name, str(column["name"]), str(args.get("to")), str(args.get("field")))
                    )
