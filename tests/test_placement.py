"""Task labels and group placement on hand-checked cases."""

from __future__ import annotations

import numpy as np
import pytest

from airflow_adaptive.core.labels import FamilyDemand, interval_bounds, task_labels
from airflow_adaptive.core.placement import GroupView, PlacementEngine, TaskDemandView

GIB = 1024**3


def test_interval_bounds_follow_group_capacity() -> None:
    values = list(range(1, 101))
    # Two groups, the stronger twice the capacity: the lower third of demands goes to the weaker one.
    assert interval_bounds(values, [1, 2]) == pytest.approx(np.quantile(values, [1 / 3]))
    with pytest.raises(ValueError, match="positive"):
        interval_bounds(values, [1, 0])


def demands() -> dict[str, FamilyDemand]:
    return {
        "light": FamilyDemand("light", 0.2, 0.2 * GIB, 1e5),
        "mid": FamilyDemand("mid", 1.0, 2 * GIB, 1e6),
        "cpu-heavy": FamilyDemand("cpu-heavy", 7.5, 0.3 * GIB, 1e5),
        "mem-heavy": FamilyDemand("mem-heavy", 0.5, 30 * GIB, 1e6),
        "io-heavy": FamilyDemand("io-heavy", 0.5, 1 * GIB, 5e8),
        "unmeasured-io": FamilyDemand("unmeasured-io", 2.0, 4 * GIB, None),
    }


CAPACITIES = {"cpu": [8, 8, 8], "memory": [32, 32, 32], "io": [5, 5, 5]}


def test_labels_rank_each_family_among_all() -> None:
    assert task_labels("cpu-heavy", demands(), CAPACITIES) == {"cpu": 3, "memory": 1, "io": 1}
    assert task_labels("mem-heavy", demands(), CAPACITIES)["memory"] == 3  # type: ignore[index]
    assert task_labels("unmeasured-io", demands(), CAPACITIES) == {"cpu": 3, "memory": 3}
    assert task_labels("never-seen", demands(), CAPACITIES) is None


GROUPS = [
    GroupView(1, {"cpu": 1, "memory": 1, "io": 1}, frozenset({"x86_64"}), 16 * GIB),
    GroupView(2, {"cpu": 2, "memory": 2, "io": 1}, frozenset({"x86_64", "avx2"}), 64 * GIB),
    GroupView(3, {"cpu": 3, "memory": 3, "io": 1}, frozenset({"x86_64", "avx2", "avx512"}), 64 * GIB),
]


def test_cpu_heavy_memory_light_prefers_the_best_cpu_group_and_explains_why() -> None:
    labels = task_labels("cpu-heavy", demands(), CAPACITIES)
    result = PlacementEngine().place(TaskDemandView("cpu-heavy", labels), GROUPS)
    assert labels == {"cpu": 3, "memory": 1, "io": 1}
    # |3-3|+|3-1|+|1-1| = 2 for group 3 and |2-3|+|2-1|+0 = 2 for group 2: a tie goes to the stronger group.
    assert [r.group.id for r in result.ranked] == [3, 2, 1]
    assert "tarema 2" in result.explain() and result.preference


def test_unknown_task_has_no_preference() -> None:
    result = PlacementEngine().place(TaskDemandView("new", None), GROUPS)
    assert not result.preference and "no labels yet" in result.explain()


def test_capabilities_and_memory_filter_groups_with_reasons() -> None:
    engine = PlacementEngine()
    needs = TaskDemandView("t", {"cpu": 1}, 32 * GIB, frozenset({"avx2"}))
    result = engine.place(needs, GROUPS)
    assert [r.group.id for r in result.ranked] == [2, 3]
    assert dict((g.id, why) for g, why in result.rejected) == {
        1: f"capabilities: lacks avx2; memory-fit: no node can allocate {32 * GIB} bytes (largest {16 * GIB})"
    }
    nowhere = engine.place(TaskDemandView("t", None, None, frozenset({"gpu"})), GROUPS)
    assert nowhere.ranked == () and "lacks gpu" in nowhere.explain()
