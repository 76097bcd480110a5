"""Algorithm 1 and what it composes: the run's configuration and RNG streams, its in-memory state, the
registries of mutators (and, in `search`, of parent policies)."""

from coco_sql.engine.config import IterationReport, RunConfig, RunSummary, iteration_rng
from coco_sql.engine.loop import EvolutionLoop
from coco_sql.engine.registry import MUTATORS, build_mutator

__all__ = [
    "MUTATORS",
    "EvolutionLoop",
    "IterationReport",
    "RunConfig",
    "RunSummary",
    "build_mutator",
    "iteration_rng",
]
