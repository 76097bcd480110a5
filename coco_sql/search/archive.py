"""The MAP-Elites archive over islands (CoCoEvolve Appendix C.1; Mouret & Clune 2015).

Each island keeps at most one elite per behaviour cell. A child lands in its island's cell when the cell is empty
or the child's validation score is strictly higher than the occupant's (ties keep the incumbent, so a
re-discovery never churns the archive). Every landing is returned as an `ArchiveEntry`, which the loop writes to
the `archive_entries` table; `IslandArchive.from_entries` rebuilds the same archive from those rows on resume.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from coco_sql.store.records import ArchiveEntry


@dataclass(frozen=True)
class Elite:
    program_id: str
    iteration: int
    score: float


class IslandArchive:
    def __init__(self, n_islands: int) -> None:
        if n_islands < 1:
            raise ValueError("an archive needs at least one island")
        self.n_islands = n_islands
        self._cells: list[dict[str, Elite]] = [{} for _ in range(n_islands)]

    # -- admission -------------------------------------------------------------------------------------------
    def admits(self, island: int, cell: str, score: float) -> bool:
        occupant = self._cells[island].get(cell)
        return occupant is None or score > occupant.score

    def place(self, island: int, cell: str, elite: Elite) -> None:
        self._cells[island][cell] = elite

    def try_admit(
        self, island: int, cell: str, elite: Elite, *, iteration: int, seq: int, reason: str
    ) -> ArchiveEntry | None:
        """Admit `elite` if it improves its cell; return the landing to record, or None."""
        if not self.admits(island, cell, elite.score):
            return None
        self.place(island, cell, elite)
        return ArchiveEntry(
            iteration=iteration, seq=seq, island=island, cell=cell, program_id=elite.program_id, reason=reason
        )

    def migrate(self, iteration: int, first_seq: int) -> list[ArchiveEntry]:
        """Ring migration: each island's best is offered to the next island, in the cell it occupies.

        The best of every island is read before any move, so the result does not depend on island order.
        """
        if self.n_islands == 1:
            return []
        movers = [(island, self.best_with_cell(island)) for island in range(self.n_islands)]
        landed: list[ArchiveEntry] = []
        for island, found in movers:
            if found is None:
                continue
            cell, elite = found
            target = (island + 1) % self.n_islands
            entry = self.try_admit(
                target, cell, elite, iteration=iteration, seq=first_seq + len(landed), reason="migrated"
            )
            if entry is not None:
                landed.append(entry)
        return landed

    # -- reads -----------------------------------------------------------------------------------------------
    def elites(self, island: int | None = None) -> list[Elite]:
        """Elites of one island (or all islands, de-duplicated), in a deterministic order."""
        islands = range(self.n_islands) if island is None else (island,)
        seen: dict[str, Elite] = {}
        for i in islands:
            for cell in sorted(self._cells[i]):
                elite = self._cells[i][cell]
                seen.setdefault(elite.program_id, elite)
        return sorted(seen.values(), key=lambda e: (e.iteration, e.program_id))

    def cells(self, island: int) -> Mapping[str, Elite]:
        return dict(self._cells[island])

    def best_with_cell(self, island: int) -> tuple[str, Elite] | None:
        items = sorted(self._cells[island].items(), key=lambda kv: (-kv[1].score, kv[1].iteration, kv[0]))
        return items[0] if items else None

    def best(self, island: int | None = None) -> Elite | None:
        """Highest score; ties go to the earliest program (the simplest explanation found first)."""
        candidates = self.elites(island)
        return min(candidates, key=lambda e: (-e.score, e.iteration)) if candidates else None

    def __len__(self) -> int:
        return len(self.elites())

    # -- persistence -----------------------------------------------------------------------------------------
    @classmethod
    def from_entries(
        cls, n_islands: int, entries: Iterable[ArchiveEntry], elites: Mapping[str, Elite]
    ) -> IslandArchive:
        """Replay recorded landings (in order) to rebuild the archive exactly as it was."""
        archive = cls(n_islands)
        for entry in sorted(entries, key=lambda e: (e.iteration, e.seq)):
            archive.place(entry.island, entry.cell, elites[entry.program_id])
        return archive
