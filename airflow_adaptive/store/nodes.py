"""Node profiles and groups in the store; the task families' mean demands for labelling."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Engine, delete, func, select
from sqlalchemy.dialects import postgresql, sqlite

from airflow_adaptive.core.grouping import Grouping, NodeProfile, task_feature_ranks
from airflow_adaptive.core.labels import FamilyDemand
from airflow_adaptive.core.model import ExitReason
from airflow_adaptive.store.tables import node, task_attempt


class NodeRepository:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def save(self, profiles: Sequence[NodeProfile], grouping: Grouping) -> None:
        """Replace the node set: profiles with their group; nodes no longer present are removed."""
        now = datetime.now(timezone.utc)
        rows = []
        for p in profiles:
            group = grouping.group_of(p.node)
            rows.append(
                {
                    "node": p.node,
                    "benchmarks": dict(p.benchmarks),
                    "cores": p.cores,
                    "memory_bytes": p.memory_bytes,
                    "capabilities": sorted(p.capabilities),
                    "profiled_at": now,
                    "group_id": group.id if group else None,
                    "group_ranks": dict(group.ranks) if group else None,
                    "grouped_at": now,
                }
            )
        with self.engine.begin() as conn:
            conn.execute(delete(node).where(node.c.node.not_in([p.node for p in profiles])))
            dialect = postgresql if self.engine.dialect.name == "postgresql" else sqlite
            stmt = dialect.insert(node).values(rows)
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=["node"], set_={c: stmt.excluded[c] for c in rows[0] if c != "node"}
                )
            )

    def nodes(self) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(select(node).order_by(node.c.node))]


def group_views(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per group: members, ranks per task feature, offered capabilities, capacities."""
    groups: dict[int, dict[str, Any]] = {}
    for row in rows:
        if row["group_id"] is None:
            continue
        g = groups.setdefault(
            row["group_id"],
            {"id": row["group_id"], "members": [], "ranks": row["group_ranks"] or {}, "capabilities": set(),
             "cores": 0, "memory_bytes": 0, "largest_memory_bytes": None},
        )  # fmt: skip
        g["members"].append(row["node"])
        g["capabilities"] |= set(row["capabilities"] or [])
        g["cores"] += row["cores"] or 0
        g["memory_bytes"] += row["memory_bytes"] or 0
        if row["memory_bytes"]:
            g["largest_memory_bytes"] = max(g["largest_memory_bytes"] or 0, row["memory_bytes"])
    for g in groups.values():
        g["task_ranks"] = task_feature_ranks(g["ranks"])
    return [groups[k] for k in sorted(groups)]


def family_demands(engine: Engine) -> dict[str, FamilyDemand]:
    """Mean cores busy, peak memory and I/O rate of every family's completed attempts."""
    wall = func.nullif(task_attempt.c.wall_seconds, 0)
    done = task_attempt.c.exit_reason == ExitReason.COMPLETED.value
    stmt = (
        select(
            task_attempt.c.task_family,
            func.avg(task_attempt.c.cpu_core_seconds / wall),
            func.avg(task_attempt.c.peak_memory_bytes),
            func.avg(
                (func.coalesce(task_attempt.c.read_bytes, 0) + func.coalesce(task_attempt.c.write_bytes, 0))
                / wall
            ),
        )
        .where(done)
        .group_by(task_attempt.c.task_family)
    )
    with engine.connect() as conn:
        rows = conn.execute(stmt).all()

    def number(v: Any) -> float | None:
        return None if v is None else float(v)

    return {f: FamilyDemand(f, number(c), number(m), number(io)) for f, c, m, io in rows}
