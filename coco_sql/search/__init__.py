"""Search policy: the MAP-Elites archive over islands, behaviour features, and parent policies."""

from coco_sql.search.archive import Elite, IslandArchive
from coco_sql.search.features import cell_of_counts
from coco_sql.search.pareto import Frontier, ParetoPolicy, pareto_frontier
from coco_sql.search.policies import DEFAULT_POLICY, POLICIES, BestPolicy, MapElitesPolicy
from coco_sql.search.population import ParentPolicy, Population
from coco_sql.search.rare import RareCapabilityPolicy, RareTerms, rare_terms
from coco_sql.search.roster import (
    LpRosterPolicy,
    Roster,
    build_roster,
    delta_jp,
    jp_score,
    lp_score,
    roster_probabilities,
)

__all__ = [
    "DEFAULT_POLICY",
    "POLICIES",
    "BestPolicy",
    "Elite",
    "Frontier",
    "IslandArchive",
    "LpRosterPolicy",
    "MapElitesPolicy",
    "ParentPolicy",
    "ParetoPolicy",
    "Population",
    "RareCapabilityPolicy",
    "RareTerms",
    "Roster",
    "build_roster",
    "cell_of_counts",
    "delta_jp",
    "jp_score",
    "lp_score",
    "pareto_frontier",
    "rare_terms",
    "roster_probabilities",
]
