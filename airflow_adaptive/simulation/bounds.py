"""How long a task runs on a node, and the makespan no policy can beat."""

from __future__ import annotations

from .cluster import Cluster, SimNode
from .params import DEFAULT_PARAMS, SimParams
from .workload import SimTask, Workload, dominant_features, family_demands


def runtime_on(task: SimTask, node: SimNode, dominant: str) -> float:
    """Seconds the task runs on the node alone: measured there (Lotaru), else scaled by its speed."""
    measured = task.runtime_by_machine.get(node.lotaru_machine()) if task.runtime_by_machine else None
    if measured is not None:
        return measured
    return task.runtime_s / node.speed[dominant]


def lower_bound_s(cluster: Cluster, workload: Workload, params: SimParams = DEFAULT_PARAMS) -> float:
    """No policy can beat this makespan: every task on its fastest node with no waiting and no
    interference (the critical path), or all work packed perfectly onto all cores."""
    dominant = dominant_features(family_demands(workload.tasks))
    index = {t.id: i for i, t in enumerate(workload.tasks)}
    finish = [0.0] * len(workload.tasks)
    core_s = 0.0
    for i in workload.order:
        t = workload.tasks[i]
        fastest = min(runtime_on(t, n, dominant[t.family]) for n in cluster.nodes)
        start = max((finish[index[p]] for p in t.parents), default=0.0)
        finish[i] = start + params.pod_startup_s + fastest
        core_s += t.request_cores * (params.pod_startup_s + fastest)
    return max(max(finish), core_s / sum(n.cores for n in cluster.nodes))
