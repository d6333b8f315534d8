"""The predictor contract, its registry, and composable wrappers.

Predictors follow scikit-learn's estimator rules: ``__init__`` only stores
parameters, ``fit`` learns attributes ending in ``_`` and returns ``self``,
``predict`` is pure. Wrappers (margin, floor, cap) compose instead of flags.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from airflow_adaptive.exceptions import UnknownStrategyError


@dataclass(frozen=True)
class Sample:
    """One completed attempt as a predictor sees it."""

    peak_memory_bytes: int
    input_size_bytes: int | None = None
    wall_seconds: float | None = None
    lower_bound: bool = False  # sampled or censored: the true peak was at least this


class Predictor(ABC):
    """Predicts the memory (bytes) the next attempt of a task family needs."""

    name: str = ""

    def get_params(self) -> dict[str, Any]:
        sig = inspect.signature(type(self).__init__)
        return {p: getattr(self, p) for p in sig.parameters if p != "self"}

    def explain(self) -> str:
        """What the last ``fit`` learnt, in words, for decision explanations."""
        return self.name

    @abstractmethod
    def fit(self, samples: Sequence[Sample]) -> Predictor: ...

    @abstractmethod
    def predict(self, input_size_bytes: int | None = None) -> int: ...


class Wrapper(Predictor):
    """A predictor that post-processes another one."""

    def __init__(self, inner: Predictor) -> None:
        self.inner = inner
        self.name = inner.name  # a wrapped strategy keeps its registered name

    def fit(self, samples: Sequence[Sample]) -> Wrapper:
        self.inner.fit(samples)
        return self

    def explain(self) -> str:
        return self.inner.explain()


class WithMargin(Wrapper):
    """Adds a relative safety margin (0.15 = +15 %)."""

    def __init__(self, inner: Predictor, margin_fraction: float = 0.15) -> None:
        super().__init__(inner)
        self.margin_fraction = margin_fraction

    def predict(self, input_size_bytes: int | None = None) -> int:
        return int(self.inner.predict(input_size_bytes) * (1.0 + self.margin_fraction))

    def explain(self) -> str:
        return f"{self.inner.explain()}, +{self.margin_fraction:.0%} margin"


class WithBounds(Wrapper):
    """Keeps predictions within [floor, cap] bytes."""

    def __init__(self, inner: Predictor, floor_bytes: int = 1024**2, cap_bytes: int | None = None) -> None:
        super().__init__(inner)
        self.floor_bytes = floor_bytes
        self.cap_bytes = cap_bytes

    def predict(self, input_size_bytes: int | None = None) -> int:
        value = max(self.floor_bytes, self.inner.predict(input_size_bytes))
        return value if self.cap_bytes is None else min(self.cap_bytes, value)


P = TypeVar("P", bound=Callable[..., Predictor])
_PREDICTORS: dict[str, Callable[..., Predictor]] = {}


def register_predictor(name: str) -> Callable[[P], P]:
    """Register a predictor factory under a stable name used in config, CLI and UI."""

    def add(factory: P) -> P:
        if name in _PREDICTORS:
            raise ValueError(f"predictor {name!r} registered twice")
        _PREDICTORS[name] = factory
        return factory

    return add


def predictor_names() -> list[str]:
    return sorted(_PREDICTORS)


def make_predictor(name: str, **params: Any) -> Predictor:
    try:
        factory = _PREDICTORS[name]
    except KeyError:
        raise UnknownStrategyError(
            f"unknown sizing strategy {name!r}; known: {', '.join(predictor_names())}"
        ) from None
    return factory(**params)
