"""What a user reads about runs: read models over the store, shared by the CLI, the SQL procedures and the HTML
report."""

from coco_sql.report.read_models import (
    Champion,
    CostReport,
    champion,
    cost,
    leaderboard,
    lineage,
    row_solvers,
    status,
)

__all__ = ["Champion", "CostReport", "champion", "cost", "leaderboard", "lineage", "row_solvers", "status"]
