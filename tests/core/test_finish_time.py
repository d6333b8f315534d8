"""Finish-time placement: the CPU sharing a pod would meet, and tarema's labels as its fallback."""

from __future__ import annotations

from dataclasses import replace

import pytest

from airflow_adaptive.core.placement import (
    FinishTimeScorer,
    GroupView,
    NodeLoad,
    PlacementEngine,
    TaskDemandView,
    cpu_slowdown,
    engine_for,
)


def test_cpu_slowdown_is_the_sharing_on_the_node_kube_scheduler_would_pick() -> None:
    """Kubernetes packs by requests: the least requested node the request fits is where the pod
    lands; it runs slower there when the cores kept busy, its own included, pass the node's."""
    task = TaskDemandView("f", None, request_cores=2.0, busy_cores=5.5)
    # Node a: 8 of 16 cores requested, 14 busy; node b: 14 of 16 requested (the 2 fit), 2 busy.
    nodes = (NodeLoad(16.0, 8.0, 14.0), NodeLoad(16.0, 14.0, 2.0))
    assert cpu_slowdown(task, nodes) == pytest.approx((14.0 + 5.5) / 16.0)  # a: 8/16 < 14/16
    # Node a full by requests (15 of 16): b is the one the request fits, and it has room.
    assert cpu_slowdown(task, (NodeLoad(16.0, 15.0, 14.0), NodeLoad(16.0, 14.0, 2.0))) == 1.0
    # No node fits: the least requested one, where the pod would wait.
    assert cpu_slowdown(task, (NodeLoad(4.0, 3.0, 6.0), NodeLoad(4.0, 3.5, 0.0))) == pytest.approx(11.5 / 4)
    # A family never measured counts its request; no nodes known (live load off) or no cores: 1.
    assert cpu_slowdown(TaskDemandView("g", None, request_cores=4.0), (NodeLoad(8.0, 0.0, 6.0),)) == 1.25
    assert cpu_slowdown(task, None) == 1.0 and cpu_slowdown(task, (NodeLoad(0.0),)) == 1.0
    # Requests summed from millicores fit exactly: 39 x 0.1 of 4 cores leaves 0.1.
    tenth = TaskDemandView("g", None, request_cores=0.1, busy_cores=0.0)
    # (Without that, no node would fit and the least requested, the tiny one, would be taken: 10.)
    tiny = NodeLoad(0.1, 0.05, 1.0)
    assert cpu_slowdown(tenth, (NodeLoad(4.0, sum([0.1] * 39), 2.0), tiny)) == 1.0


def test_finish_time_weighs_each_groups_runtime_by_the_sharing_it_would_meet() -> None:
    busy = (NodeLoad(8.0, 6.0, 12.0),)  # requests leave 2 cores, but 12 of 8 are busy
    groups = [
        GroupView(1, {"cpu": 1}),
        GroupView(2, {"cpu": 2}, nodes=(NodeLoad(8.0, 4.0, 4.0),)),
        GroupView(3, {"cpu": 3}, nodes=busy),
    ]
    task = TaskDemandView("f", None, runtime_by_group_s={1: 140.0, 2: 100.0, 3: 70.0}, request_cores=2.0)
    # Expected finish, a family never measured (its 2-core request): 140 s, 100 s (6 of 8 busy),
    # 70 x (12 + 2) / 8 = 122.5 s.
    engine = engine_for("finish-time")
    assert engine.place(task, groups).preferred_groups == (2, 3, 1)
    # Measured at 0.5 cores busy: 70 x 12.5 / 8 = 109.4 s on group 3, 100 s on 2, still first.
    light = replace(task, busy_cores=0.5)
    assert engine.place(light, groups).preferred_groups == (2, 3, 1)
    # Live load off (no nodes known): the runtimes alone.
    assert engine.place(task, [replace(g, nodes=None) for g in groups]).preferred_groups == (3, 2, 1)
    # Group 3 idle now: nothing to share, 70 s.
    groups[2] = GroupView(3, {"cpu": 3}, nodes=(NodeLoad(8.0),))
    assert engine.place(light, groups).preferred_groups == (3, 2, 1)
    # Group 3 has no schedulable node now (live load lists none): it is not preferred at all.
    groups[2] = GroupView(3, {"cpu": 3}, nodes=())
    result = engine.place(light, groups)
    assert result.preferred_groups == (2, 1)
    assert result.rejected == ((groups[2], "schedulable: has no schedulable node now"),)


def test_finish_time_places_a_family_without_runtimes_by_tarema_labels() -> None:
    groups = [GroupView(1, {"cpu": 1}), GroupView(2, {"cpu": 2}), GroupView(3, {"cpu": 3})]
    task = TaskDemandView("new", {"cpu": 2})
    result = engine_for("finish-time").place(task, groups)
    assert result.preferred_groups == (2, 3, 1)  # |2-2| = 0, then |3-2| = |1-2| = 1: ties to the stronger
    assert "tarema 0" in result.explain() and "no recorded runtime yet" in result.explain()
    # Neither runtimes nor labels: no preference, kube-scheduler spreads.
    nothing = engine_for("finish-time").place(TaskDemandView("new", None), groups)
    assert not nothing.preference and "no recorded runtime yet" in nothing.explain()
    alone = PlacementEngine(scorers=((FinishTimeScorer(), 1.0),)).place(task, groups)
    assert not alone.preference  # the fallback is finish-time's, not every engine's
