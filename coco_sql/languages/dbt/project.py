"""A dbt project as one program: a small tree of files with one stable text form.

A program row holds one text, so a project is stored as its files concatenated in path order, each under a
marker line::

    -- file: dbt_project.yml
    name: shop
    ...
    -- file: models/orders.sql
    select ...

The form is canonical: paths sorted, newlines normalised to ``\\n``, a byte-order mark dropped, trailing blank
lines cut and each non-empty file ending in exactly one newline. So ``to_text(from_text(t)) == t`` for every
canonical text, ``from_text(p.to_text()) == p`` for every project, and two projects with the same files have
the same text: diffs, lineage and history work per file (`diff_projects`).

Which files a program may hold, and why so few: the validator has to be able to vouch for every one.

- ``dbt_project.yml`` (required): the project's name and model configs (`yaml_check` allows a few keys);
- ``models/**/*.sql`` models, ``models/**/*.yml`` their properties (sources, tests, descriptions),
  ``models/**/*.md`` docs blocks (``{{ doc('x') }}`` in a description needs one);
- ``macros/**/*.sql``: Jinja macros, which the validator expands itself (dbt never sees them);
- ``dbt_packages/<package>/macros/**/*.sql``: the macros of the packages present in the folder (``dbt_utils``),
  called under the package's name and expanded the same way; the repair mutator never edits them.

Seeds, snapshots, analyses, singular tests, ``packages.yml`` and ``profiles.yml`` are not part of a program: the
data comes from the task's sources and the runner writes the profile. Paths are relative, POSIX, of plain
names (no ``..``, no hidden files, no backslash), and sizes are bounded (`Limits`), since a candidate is hostile.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from coco_sql.errors import CandidateRejected

MARKER = "-- file: "
PROJECT_FILE = "dbt_project.yml"
PACKAGES = "dbt_packages"
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_MODEL_SUFFIXES = (".sql", ".yml", ".md")


@dataclass(frozen=True)
class Limits:
    """Bounds on a project's size: checked before anything parses it."""

    max_files: int = 400
    max_file_bytes: int = 200_000
    max_total_bytes: int = 1_000_000
    max_depth: int = 6  # folders under models/, e.g. models/staging/shop/x.sql is depth 3


DEFAULT_LIMITS = Limits()


def normalise(text: str) -> str:
    """One file's canonical content: ``\\n`` newlines, no BOM, no trailing blank lines, one final newline."""
    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines) + "\n" if lines else ""


def check_path(path: str, limits: Limits = DEFAULT_LIMITS) -> None:
    """Reject a path outside the allowed folders, or one that could escape the project directory."""
    allowed = (
        "allowed: dbt_project.yml, models/**/*.sql|.yml|.md, macros/**/*.sql, dbt_packages/*/macros/**/*.sql"
    )
    if not path or path != path.strip():
        raise CandidateRejected(f"file path {path!r} is empty or has surrounding spaces; {allowed}")
    if path.startswith("/") or "\\" in path or ":" in path:
        raise CandidateRejected(f"file path {path!r} must be relative and use '/'; {allowed}")
    parts = path.split("/")
    for part in parts:
        if part in ("", ".", "..") or not _NAME.fullmatch(part):
            raise CandidateRejected(
                f"file path {path!r} has a bad part {part!r}: use letters, digits, '_', '-', '.' and no "
                f"'..' or hidden names; {allowed}"
            )
    if path == PROJECT_FILE:
        return
    if parts[0] == "models" and len(parts) >= 2 and path.endswith(_MODEL_SUFFIXES):
        if len(parts) - 2 > limits.max_depth:
            raise CandidateRejected(f"file path {path!r} is nested deeper than {limits.max_depth} folders")
        return
    if parts[0] == "macros" and 2 <= len(parts) <= limits.max_depth + 2 and path.endswith(".sql"):
        return
    if (
        parts[0] == PACKAGES
        and len(parts) >= 4
        and parts[2] == "macros"
        and len(parts) <= limits.max_depth + 4
        and path.endswith(".sql")
    ):
        return
    raise CandidateRejected(f"file path {path!r} is not part of a dbt program; {allowed}")


def _check_content(path: str, content: str, limits: Limits) -> None:
    size = len(content.encode("utf-8"))
    if size > limits.max_file_bytes:
        raise CandidateRejected(f"{path}: {size} bytes is over the limit of {limits.max_file_bytes} per file")
    if "\x00" in content:
        raise CandidateRejected(f"{path}: contains a NUL character; a project holds text files only")
    for number, line in enumerate(content.split("\n"), start=1):
        if line.startswith(MARKER.rstrip()):
            raise CandidateRejected(
                f"{path} line {number}: a line may not start with {MARKER.strip()!r} (it separates the files of "
                "the project's text form)"
            )


@dataclass(frozen=True)
class DbtProject:
    """The files of a dbt project, path -> canonical content; immutable and comparable.

    Build one with `DbtProject.of(files)` (checks and normalises) or `from_text` / `from_dir`; the constructor
    itself trusts its argument to be canonical already.
    """

    files: Mapping[str, str] = field(hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "files", MappingProxyType(dict(sorted(self.files.items()))))

    def __hash__(self) -> int:
        return hash(tuple(self.files.items()))

    @classmethod
    def of(cls, files: Mapping[str, str], limits: Limits = DEFAULT_LIMITS) -> DbtProject:
        """Check every path and content against `limits` and normalise the contents."""
        if len(files) > limits.max_files:
            raise CandidateRejected(f"the project has {len(files)} files; at most {limits.max_files} allowed")
        canonical: dict[str, str] = {}
        for path, content in files.items():
            check_path(path, limits)
            if not isinstance(content, str):
                raise CandidateRejected(f"{path}: content must be text, got {type(content).__name__}")
            text = normalise(content)
            _check_content(path, text, limits)
            canonical[path] = text
        total = sum(len(text.encode("utf-8")) for text in canonical.values())
        if total > limits.max_total_bytes:
            raise CandidateRejected(
                f"the project has {total} bytes; at most {limits.max_total_bytes} allowed"
            )
        if PROJECT_FILE not in canonical:
            raise CandidateRejected(
                f"the project has no {PROJECT_FILE}; every dbt project needs one at its root"
            )
        return cls(canonical)

    # -- the text form ------------------------------------------------------------------------------------
    def to_text(self) -> str:
        """The canonical one-text form (see the module docstring)."""
        return "".join(f"{MARKER}{path}\n{content}" for path, content in self.files.items())

    @classmethod
    def from_text(cls, text: str, limits: Limits = DEFAULT_LIMITS) -> DbtProject:
        """Parse the one-text form; any text whose first non-blank line is a marker is accepted (and made
        canonical), anything else is rejected with the line that is wrong."""
        if len(text.encode("utf-8")) > limits.max_total_bytes * 2:
            raise CandidateRejected(f"the project text is over {limits.max_total_bytes * 2} bytes")
        lines = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n")
        files: dict[str, list[str]] = {}
        current: list[str] | None = None
        for number, line in enumerate(lines, start=1):
            if line.startswith(MARKER):
                path = line[len(MARKER) :].strip()
                if path in files:
                    raise CandidateRejected(f"line {number}: file {path!r} appears twice in the project text")
                current = files.setdefault(path, [])
            elif current is None:
                if line.strip():
                    raise CandidateRejected(
                        f"line {number}: text before the first {MARKER.strip()!r} line; a dbt project text is "
                        f"files each under a '{MARKER}PATH' line"
                    )
            else:
                current.append(line)
        if not files:
            raise CandidateRejected(f"empty project text: expected files each under a '{MARKER}PATH' line")
        return cls.of({path: "\n".join(body) for path, body in files.items()}, limits)

    # -- files on disk --------------------------------------------------------------------------------------
    @classmethod
    def from_dir(cls, root: Path, limits: Limits = DEFAULT_LIMITS) -> DbtProject:
        """Read a project from a directory: dbt_project.yml, everything under models/ and macros/ (a file there
        that a program may not hold is an error); other top-level files (seeds, README, LICENSE) are not part of
        the program and are skipped."""
        files: dict[str, str] = {}
        if (root / PROJECT_FILE).is_file():
            files[PROJECT_FILE] = (root / PROJECT_FILE).read_text(encoding="utf-8")
        folders = ["models", "macros"]
        if (root / PACKAGES).is_dir():
            folders += [
                f"{PACKAGES}/{p.name}/macros" for p in sorted((root / PACKAGES).iterdir()) if p.is_dir()
            ]
        for folder in folders:
            for path in sorted((root / folder).rglob("*")) if (root / folder).is_dir() else ():
                if (
                    path.is_file()
                    and path.name != ".gitkeep"
                    and not (folder != "models" and path.suffix != ".sql")
                ):
                    relative = path.relative_to(root).as_posix()
                    files[relative] = path.read_text(encoding="utf-8")
        return cls.of(files, limits)

    def write(self, root: Path) -> None:
        """Write the files under `root` (which must be empty or absent)."""
        for path, content in self.files.items():
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")

    # -- views ----------------------------------------------------------------------------------------------
    def paths(self, prefix: str = "", suffix: str = "") -> list[str]:
        return [p for p in self.files if p.startswith(prefix) and p.endswith(suffix)]

    def packages(self) -> dict[str, dict[str, str]]:
        """Package name -> its macro files (path -> text), for ``dbt_packages/<package>/macros/**``."""
        found: dict[str, dict[str, str]] = {}
        for path in self.paths(f"{PACKAGES}/", ".sql"):
            found.setdefault(path.split("/")[1], {})[path] = self.files[path]
        return found

    def models(self) -> dict[str, str]:
        """Model name (the file's stem) -> its path, for every ``models/**/*.sql``."""
        return {Path(path).stem: path for path in self.paths("models/", ".sql")}

    def replace(self, changes: Mapping[str, str | None]) -> DbtProject:
        """A new project with `changes` applied: path -> new content, or None to delete the file."""
        files = dict(self.files)
        for path, content in changes.items():
            if content is None:
                files.pop(path, None)
            else:
                files[path] = content
        return DbtProject.of(files)


DBT_OWN_FILES = (".user.yml", "profiles.yml", "packages.yml", "package-lock.yml", "dependencies.yml")


def without_dbt_files(text: str) -> str:
    """A project text without the files dbt writes or reads for itself (``.user.yml``, ``profiles.yml``,
    ``packages.yml``, ``target/``, ``logs/``): a project pasted as it is on disk is not refused for them."""
    kept: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        if line.startswith(MARKER):
            path = line[len(MARKER) :].strip()
            skipping = path.rsplit("/", 1)[-1] in DBT_OWN_FILES or path.startswith(("target/", "logs/"))
        if not skipping:
            kept.append(line)
    return "".join(kept)


_REF = re.compile(r"""\bref\(\s*(?:['"]\w+['"]\s*,\s*)?['"]([A-Za-z_]\w*)['"]""")


def model_refs(project: DbtProject) -> dict[str, set[str]]:
    """Model name -> the names its ``ref()`` calls read, as written (``ref('x')``, ``ref('package', 'x')``); a ref
    built by Jinja at render time is not seen."""
    return {name: set(_REF.findall(project.files[path])) for name, path in project.models().items()}


def upstream_models(project: DbtProject, targets: Iterable[str]) -> set[str]:
    """The models the `targets` read, directly or through other models, the targets included."""
    refs = model_refs(project)
    found: set[str] = set()
    stack = [t for t in targets if t in refs]
    while stack:
        name = stack.pop()
        if name not in found:
            found.add(name)
            stack.extend(r for r in refs.get(name, ()) if r in refs)
    return found


@dataclass(frozen=True)
class FileDiff:
    """How one file differs between two projects: ``added``, ``removed`` or ``changed``, with a unified diff."""

    path: str
    status: str
    unified: str


def diff_projects(old: DbtProject, new: DbtProject, context: int = 3) -> list[FileDiff]:
    """Per-file differences from `old` to `new`, in path order; unchanged files are left out."""
    return list(_diffs(old, new, context))


def _diffs(old: DbtProject, new: DbtProject, context: int) -> Iterator[FileDiff]:
    for path in sorted(set(old.files) | set(new.files)):
        before, after = old.files.get(path), new.files.get(path)
        if before == after:
            continue
        status = "added" if before is None else "removed" if after is None else "changed"
        unified = "".join(
            difflib.unified_diff(
                _lines(before), _lines(after), fromfile=f"a/{path}", tofile=f"b/{path}", n=context
            )
        )
        yield FileDiff(path, status, unified)


def _lines(content: str | None) -> list[str]:
    return [] if content is None else content.splitlines(keepends=True)
