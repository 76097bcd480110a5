"""Search policy: the MAP-Elites archive over islands, behaviour features, and parent policies."""

from coco_sql.search.archive import Elite, IslandArchive
from coco_sql.search.features import cell_of
from coco_sql.search.policies import POLICIES, BestPolicy, MapElitesPolicy, ParentPolicy

__all__ = ["POLICIES", "BestPolicy", "Elite", "IslandArchive", "MapElitesPolicy", "ParentPolicy", "cell_of"]
