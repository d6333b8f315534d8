"""The provider's ``size_cpu`` in the simulator: a task's CPU request is the configured quantile of
the cores its family's finished tasks kept busy (core/cpu.py, the same rule and bounds), so
kube-scheduler's packing by requests sees what tasks really use."""

from __future__ import annotations

from airflow_adaptive.core.cpu import CpuHistory, decide_cpu
from airflow_adaptive.core.decide import SizingSettings

from .workload import SimTask


class CpuSizer:
    def __init__(self, settings: SizingSettings, largest_node_cores: float) -> None:
        self.settings = settings
        self.largest_node_millicores = int(largest_node_cores * 1000)
        self._busy: dict[str, list[float]] = {}  # per family: cores busy of its finished tasks

    def learn(self, task: SimTask) -> None:
        self._busy.setdefault(task.family, []).append(task.cpu_cores_used)

    def request_cores(self, task: SimTask) -> float:
        """The request the provider would set; the user's while the family has no history."""
        seen = self._busy.get(task.family)
        quantile = self.settings.cpu_quantile
        history = CpuHistory.of(seen, quantile) if seen else None
        millicores, _ = decide_cpu(
            history,
            quantile,
            self.settings.min_cpu_millicores,
            limit_millicores=None,
            largest_node_millicores=self.largest_node_millicores,
        )
        return task.request_cores if millicores is None else millicores / 1000
