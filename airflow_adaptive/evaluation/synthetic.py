"""Synthetic memory workloads of the seed papers, generated with fixed seeds (never stored).

Phung et al.: five distributions of 2,000 tasks on a 64 GB machine. The paper
shows them only as a figure; the parameters here are chosen so that the
whole-machine ATE of each set equals the paper's Table II (mean peak = ATE x
64 GB): normal 12.4 %, uniform 39.1 %, exponential 15.7 %, bimodal 31.3 %,
trimodal 30.7 %. Bimodal and trimodal tasks carry their mode as the task type
(Phung's "level 3" information). Runtimes are one hour each.

Witt et al.: abstract tasks whose peak is, with probability 1/2, linear in the
input size (``y = m1 x + m0 + N(0, v)``), else independent of it; mean, spread,
error and slope drawn as in the paper's Table II (mean scaled down from
U(1 GB, 1 TB) to U(1 GB, 64 GB) so one node can hold every task).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from airflow_adaptive.core.units import GB
from airflow_adaptive.traces.runs import TaskRun

PHUNG_MACHINE_BYTES = 64 * GB
PHUNG_TASKS = 2000
HOUR = 3600.0


def _phung(
    name: str, draw: Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]], seed: int
) -> list[TaskRun]:
    rng = np.random.default_rng(seed)
    peaks_gb, modes = draw(rng, PHUNG_TASKS)
    peaks = np.clip(peaks_gb, 0.05, 64.0) * GB
    return [TaskRun(f"{name}-type{int(m)}", int(p), HOUR) for p, m in zip(peaks, modes, strict=True)]


def _single(
    sample: Callable[[np.random.Generator, int], np.ndarray],
) -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    return lambda rng, n: (sample(rng, n), np.zeros(n))


def _modes(centres: list[tuple[float, float]]) -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    def draw(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        modes = rng.integers(0, len(centres), n)
        mean = np.array([c[0] for c in centres])[modes]
        std = np.array([c[1] for c in centres])[modes]
        return rng.normal(mean, std), modes

    return draw


PHUNG_SETS: dict[str, Callable[..., tuple[np.ndarray, np.ndarray]]] = {
    "normal": _single(lambda rng, n: rng.normal(7.94, 2.0, n)),
    "uniform": _single(lambda rng, n: rng.uniform(1.0, 49.05, n)),
    "exponential": _single(lambda rng, n: rng.exponential(10.05, n)),
    "bimodal": _modes([(8.0, 1.5), (32.06, 3.0)]),
    "trimodal": _modes([(5.0, 1.0), (20.0, 2.0), (33.94, 3.0)]),
}


def phung(name: str, seed: int = 0) -> list[TaskRun]:
    """One of Phung's five synthetic sets: normal, uniform, exponential, bimodal, trimodal."""
    try:
        return _phung(name, PHUNG_SETS[name], seed)
    except KeyError:
        raise ValueError(f"unknown Phung set {name!r}; known: {', '.join(PHUNG_SETS)}") from None


@dataclass(frozen=True)
class WittModel:
    """One abstract task's memory model (Witt et al., Eq. 5): peak linear in input with probability 1/2."""

    mean_bytes: float
    std_bytes: float
    error_std_bytes: float
    slope: float
    linear: bool

    @classmethod
    def draw(cls, rng: np.random.Generator, mean_bytes: float) -> WittModel:
        std = rng.uniform(0.03, 0.1) * mean_bytes
        return cls(
            mean_bytes,
            std,
            float(np.sqrt(rng.uniform(0.1, 0.75) * std**2)),
            rng.uniform(1, 10),
            bool(rng.random() < 0.5),
        )

    def sample(self, rng: np.random.Generator) -> tuple[float, float]:
        """(input bytes, peak bytes); inputs centred so that peaks keep the model's mean and spread."""
        x = rng.normal(self.mean_bytes / self.slope, self.std_bytes / self.slope)
        if self.linear:
            return x, self.slope * x + rng.normal(0.0, self.error_std_bytes)
        return x, rng.normal(self.mean_bytes, self.std_bytes)


def witt_linear(tasks: int = 1000, families: int = 10, seed: int = 0) -> list[TaskRun]:
    """A workflow of ``tasks`` instances over ``families`` abstract tasks with Witt's memory models."""
    rng = np.random.default_rng(seed)
    models = [WittModel.draw(rng, rng.uniform(1, 64) * GB) for _ in range(families)]
    runs: list[TaskRun] = []
    for _ in range(tasks):
        family = int(rng.integers(families))
        x, peak = models[family].sample(rng)
        runs.append(
            TaskRun(
                f"witt-{family}",
                int(max(peak, 0.05 * GB)),
                float(rng.uniform(0.5, 2.0) * HOUR),
                int(max(x, 1.0)),
            )
        )
    return runs
