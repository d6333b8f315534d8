"""What users do today: their own estimate, a whole node, or start small and double."""

from __future__ import annotations

from collections.abc import Sequence

from ..units import GIB
from .base import Predictor, Sample, register_predictor


class UserEstimate(Predictor):
    """The request the DAG author wrote; doubling after an OOM kill (Nextflow's ``memory * task.attempt``)."""

    name = "user"
    min_samples = 10**18  # never learns

    def _fit(self, samples: Sequence[Sample]) -> None:  # pragma: no cover - never warm
        pass

    def _predict(self, input_size_bytes: int | None) -> float:  # pragma: no cover - never warm
        return self.default_bytes


class WholeNode(Predictor):
    """The node's allocatable memory: no OOM kills, the most waste. Through the live decision (pods,
    replay) a family that has not finished a task yet keeps the user's request first, as under
    every strategy: in ``completed`` history, where many tasks start before the first ends, that is
    more of the trace than in ``sequential`` (chipseq's example: 3,210 against 4,220 GB·h)."""

    name = "whole-node"
    min_samples = 0

    def __init__(self, cap_bytes: int = 64 * GIB) -> None:
        self.cap_bytes = cap_bytes

    def _fit(self, samples: Sequence[Sample]) -> None:
        pass

    def _predict(self, input_size_bytes: int | None) -> float:
        return self.cap_bytes


class Doubling(Predictor):
    """Phung's double allocation: start at a fraction of the node, x2 per failure, never learn."""

    name = "doubling"
    min_samples = 0

    def __init__(self, cap_bytes: int = 64 * GIB, initial_fraction: float = 1 / 8) -> None:
        self.cap_bytes = cap_bytes
        self.initial_fraction = initial_fraction

    def _fit(self, samples: Sequence[Sample]) -> None:
        pass

    def _predict(self, input_size_bytes: int | None) -> float:
        return self.cap_bytes * self.initial_fraction


register_predictor("user")(UserEstimate)
register_predictor("whole-node", takes=("cap_bytes",))(WholeNode)
register_predictor("doubling", anchor=True, takes=("cap_bytes",))(Doubling)
