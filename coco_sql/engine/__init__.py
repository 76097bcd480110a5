"""Algorithm 1 and what it composes: the run's configuration and RNG streams, its in-memory state, the
registries of mutators (and, in `search`, of parent policies). Exports load on first use (`coco_sql.lazy`)."""

from coco_sql.lazy import lazy_exports

_WHERE = {
    "IterationReport": ".config",
    "RunConfig": ".config",
    "RunSummary": ".config",
    "iteration_rng": ".config",
    "EvolutionLoop": ".loop",
    "MUTATORS": ".registry",
    "build_mutator": ".registry",
}
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
__all__ = sorted(_WHERE)
