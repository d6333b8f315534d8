"""The predictor contract, its registry, and composable wrappers.

Predictors follow scikit-learn's estimator rules: ``__init__`` only stores
parameters, ``fit`` learns attributes ending in ``_`` and returns ``self``,
``predict`` and ``retry`` are pure (the same answer every time, no state
changed; a randomised strategy draws from a generator seeded by its inputs).
What other families teach a cold one (the prior) goes in through ``fit``.
Every predictor answers two questions: the first allocation of the next
attempt (``predict``) and the allocation after an OOM kill at
``failed_bytes`` (``retry``). Until it has ``min_samples`` samples a
predictor is cold and gives the user's request (or ``default_bytes``),
doubling on failure. Wrappers (margin, bounds) compose instead of flags.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import numpy as np

from ..registry import Registry
from ..units import GIB, MIB
from .retry import double

if TYPE_CHECKING:
    from .prior import PeakPrior


@dataclass(frozen=True)
class Sample:
    """One completed attempt as a predictor sees it."""

    peak_memory_bytes: int
    input_size_bytes: int | None = None
    wall_seconds: float | None = None
    lower_bound: bool = False  # sampled or censored: the true peak was at least this


P = TypeVar("P", bound="Predictor")
W = TypeVar("W", bound="Wrapper")


@dataclass(frozen=True)
class Tags:
    """What a strategy does beyond predicting and retrying, in one object (scikit-learn's
    ``__sklearn_tags__``): what the decision around it may rely on."""

    borrows_when_cold: bool = False  # while cold, a similar family's model may size it (similar.py)
    # floored at a cold start while the family's unfinished attempts outnumber its finished (unfinished.py)
    guards_unfinished: bool = False
    # seconds per decision, not milliseconds (tuned models): the what-if leaves it out
    slow: bool = False


class Predictor(ABC):
    """Predicts the memory (bytes) an attempt of a task family needs."""

    name: str = ""
    min_samples: int = 1
    default_bytes: int = GIB

    def tags(self) -> Tags:
        return Tags()

    def get_params(self) -> dict[str, Any]:
        sig = inspect.signature(type(self).__init__)
        return {p: getattr(self, p) for p in sig.parameters if p not in ("self", "args", "kwargs")}

    def set_params(self, **params: Any) -> Predictor:
        for key, value in params.items():
            setattr(self, key, value)
        return self

    def fit(self: P, samples: Sequence[Sample], prior: PeakPrior | None = None) -> P:
        """Learn from ``samples``; ``prior``: what other families used, for strategies that use it
        while cold (kept by reference: a replay's prior grows as tasks finish)."""
        self.n_samples_ = len(samples)
        self._prior = prior
        if self.n_samples_ >= self.min_samples:
            self._fit(samples)
        return self

    @property
    def warm(self) -> bool:
        return getattr(self, "n_samples_", 0) >= self.min_samples

    def predict(self, input_size_bytes: int | None = None, user_request_bytes: int | None = None) -> int:
        if not self.warm:
            return int(user_request_bytes or self.default_bytes)
        return int(self._predict(input_size_bytes))

    def cold_without_request(self, user_request_bytes: int | None) -> ColdStart | None:
        """A cold family's first allocation when it asks for no memory, from what other families
        used (the prior), and why; None: this strategy has none (``default_bytes`` applies)."""
        return None

    def draws_on_prior(self, user_request_bytes: int | None) -> bool:
        """Whether a warm prediction for this request reads what other families used."""
        return False

    def use_prior(self: P, prior: PeakPrior) -> P:
        """Read ``prior`` from now on (a restored predictor was fitted without one)."""
        self._prior = prior
        return self

    def retry(
        self, failed_bytes: int, input_size_bytes: int | None = None, user_request_bytes: int | None = None
    ) -> int:
        """The allocation after an OOM kill at ``failed_bytes``; more than ``failed_bytes``."""
        if not self.warm:
            return double(failed_bytes)
        return max(int(self._retry(failed_bytes, input_size_bytes)), failed_bytes + 1)

    def explain(self) -> str:
        """What the last ``fit`` learnt, in words, for decision explanations."""
        return self.name

    def predict_noted(
        self, input_size_bytes: int | None = None, user_request_bytes: int | None = None
    ) -> tuple[int, str]:
        """``predict``'s answer and what this input changed in it, in words ("" when nothing)."""
        return self.predict(input_size_bytes, user_request_bytes), ""

    def details(self) -> dict[str, float | int | str | None]:
        """What the last ``fit`` chose, as values for a decision's details (default: nothing)."""
        return {}

    def bound_scores(self, steady: bool = False) -> np.ndarray:
        """The scores of the family's first peaks against a small-sample bound, for the store to
        calibrate that bound's level on (``bound_calibration.py``; none: a strategy without one);
        ``steady``: those against the bound of peaks far steadier than the prior instead."""
        scores = getattr(self, "bound_scores_", None)  # a fit on no samples keeps the state restored
        kinds = getattr(self, "bound_steady_", None)
        if scores is None or kinds is None or kinds.shape != scores.shape or not self.warm:
            return np.zeros(0)  # (a state stored with one and not the other is refitted: none meanwhile)
        return scores[(scores >= 0.0) & (kinds == steady)]

    def steady_scores(self) -> np.ndarray:
        return self.bound_scores(steady=True)

    @abstractmethod
    def _fit(self, samples: Sequence[Sample]) -> None: ...

    @abstractmethod
    def _predict(self, input_size_bytes: int | None) -> float: ...

    def _retry(self, failed_bytes: int, input_size_bytes: int | None) -> float:
        return double(failed_bytes)


def peaks(samples: Sequence[Sample]) -> np.ndarray:
    return np.fromiter((s.peak_memory_bytes for s in samples), dtype=float, count=len(samples))


def runtimes(samples: Sequence[Sample]) -> np.ndarray:
    """Wall seconds; unknown runtimes weigh as the mean of the known ones (or 1 s)."""
    values = np.array([np.nan if s.wall_seconds is None else s.wall_seconds for s in samples], dtype=float)
    known = values[~np.isnan(values)]
    fill = float(known.mean()) if known.size else 1.0
    return np.where(np.isnan(values), fill, np.maximum(values, 1e-3))


def retry_waste(
    alloc: np.ndarray, peak: np.ndarray | float, runtime: np.ndarray | float, ttf: float
) -> np.ndarray:
    """Memory x time wasted per task when allocating ``alloc`` and doubling after each OOM kill."""
    alloc = np.maximum(alloc, 1.0)
    doublings = retry_kills(alloc, peak)
    final = alloc * 2.0**doublings
    failed = alloc * (2.0**doublings - 1)  # the sum of every allocation before the last
    return (final - peak) * runtime + failed * runtime * ttf


def retry_kills(alloc: np.ndarray, peak: np.ndarray | float) -> np.ndarray:
    """OOM kills per task when allocating ``alloc`` and doubling after each kill."""
    return np.maximum(0, np.ceil(np.log2(np.maximum(peak / np.maximum(alloc, 1.0), 1.0))))


def prefix_quantiles(values: np.ndarray, quantiles: Sequence[float], first: int) -> np.ndarray:
    """Row ``k``: ``np.quantile(values[:first + k], quantiles)`` (numpy's default, linear method),
    for every prefix from ``first`` values to all but the last, from sorted matrices of prefixes
    instead of one sort per prefix. The arithmetic is numpy's own, so the values are the same."""
    q = np.asarray(quantiles, dtype=float)
    lengths = np.arange(first, values.size)
    block = max(1, _MATRIX_CELLS // max(values.size, 1))  # rows per matrix: bounded memory
    parts = [_quantile_rows(values, lengths[i : i + block], q) for i in range(0, lengths.size, block)]
    return np.concatenate(parts) if parts else np.empty((0, q.size))


_MATRIX_CELLS = 1 << 20


def linear_quantiles(values: np.ndarray, quantiles: np.ndarray | Sequence[float]) -> np.ndarray:
    """``np.quantile(values, quantiles)`` with numpy's own arithmetic (the same values), without its
    per-call overhead: the adaptive rules take it once per replayed task. ``values``: finite."""
    ordered = np.sort(values)
    virtual = (values.size - 1) * np.asarray(quantiles, dtype=float)
    below = np.floor(virtual).astype(np.intp)
    above = np.minimum(below + 1, values.size - 1)
    return _lerp(ordered[below], ordered[above], virtual - below)


def _quantile_rows(values: np.ndarray, lengths: np.ndarray, q: np.ndarray) -> np.ndarray:
    columns = np.arange(lengths[-1])
    rows = np.sort(np.where(columns[None, :] < lengths[:, None], values[None, : lengths[-1]], np.inf), axis=1)
    virtual = (lengths[:, None] - 1) * q[None, :]
    below = np.floor(virtual).astype(np.intp)
    above = np.minimum(below + 1, lengths[:, None] - 1)
    a, b = np.take_along_axis(rows, below, axis=1), np.take_along_axis(rows, above, axis=1)
    return _lerp(a, b, virtual - below)


def _lerp(a: np.ndarray, b: np.ndarray, gamma: np.ndarray) -> np.ndarray:
    """numpy's ``_lerp``: from whichever end is nearer, so the values are numpy's own."""
    diff = b - a
    return np.where(gamma >= 0.5, b - diff * (1 - gamma), a + diff * gamma)


class ColdStart(NamedTuple):
    """A first allocation for a family with no history, and what it was derived from; None: no
    guess yet (the basis says why), the pod keeps what it asked for."""

    allocation_bytes: float | None
    basis: str


class Wrapper(Predictor):
    """A predictor that post-processes another one."""

    def __init__(self, inner: Predictor) -> None:
        self.inner = inner

    @property
    def name(self) -> str:  # type: ignore[override]  # a wrapped strategy keeps its registered name
        return self.inner.name

    @property
    def min_samples(self) -> int:  # type: ignore[override]
        return self.inner.min_samples

    def tags(self) -> Tags:
        return self.inner.tags()

    def fit(self: W, samples: Sequence[Sample], prior: PeakPrior | None = None) -> W:
        self.inner.fit(samples, prior)
        self.n_samples_ = len(samples)
        return self

    @property
    def warm(self) -> bool:
        return self.inner.warm

    def details(self) -> dict[str, float | int | str | None]:
        return self.inner.details()

    def bound_scores(self, steady: bool = False) -> np.ndarray:
        return self.inner.bound_scores(steady)

    def predict(self, input_size_bytes: int | None = None, user_request_bytes: int | None = None) -> int:
        return self._post(self.inner.predict(input_size_bytes, user_request_bytes), cold=not self.inner.warm)

    def cold_without_request(self, user_request_bytes: int | None) -> ColdStart | None:
        return self.inner.cold_without_request(user_request_bytes)

    def draws_on_prior(self, user_request_bytes: int | None) -> bool:
        return self.inner.draws_on_prior(user_request_bytes)

    def use_prior(self: W, prior: PeakPrior) -> W:
        self.inner.use_prior(prior)
        return self

    def retry(
        self, failed_bytes: int, input_size_bytes: int | None = None, user_request_bytes: int | None = None
    ) -> int:
        return self._post(self.inner.retry(failed_bytes, input_size_bytes, user_request_bytes), cold=True)

    def predict_noted(
        self, input_size_bytes: int | None = None, user_request_bytes: int | None = None
    ) -> tuple[int, str]:
        value, note = self.inner.predict_noted(input_size_bytes, user_request_bytes)
        return self._post(value, cold=not self.inner.warm), note

    def _post(self, value: int, *, cold: bool) -> int:
        return value

    def _fit(self, samples: Sequence[Sample]) -> None:  # pragma: no cover - fit is overridden
        raise NotImplementedError

    def _predict(self, input_size_bytes: int | None) -> float:  # pragma: no cover - predict is overridden
        raise NotImplementedError

    def explain(self) -> str:
        return self.inner.explain()


class WithMargin(Wrapper):
    """Adds a relative safety margin (0.15 = +15 %) to warm first allocations."""

    def __init__(self, inner: Predictor, margin_fraction: float = 0.15) -> None:
        super().__init__(inner)
        self.margin_fraction = margin_fraction

    def _post(self, value: int, *, cold: bool) -> int:
        return value if cold else int(value * (1.0 + self.margin_fraction))

    def explain(self) -> str:
        return f"{self.inner.explain()}, +{self.margin_fraction:.0%} margin"


class WithBounds(Wrapper):
    """Keeps every allocation within [floor, cap] bytes."""

    def __init__(self, inner: Predictor, floor_bytes: int = MIB, cap_bytes: int | None = None) -> None:
        super().__init__(inner)
        self.floor_bytes = floor_bytes
        self.cap_bytes = cap_bytes

    def _post(self, value: int, *, cold: bool) -> int:
        value = max(self.floor_bytes, value)
        return value if self.cap_bytes is None else min(self.cap_bytes, value)


F = TypeVar("F", bound=Callable[..., Predictor])
BOUNDS = ("cap_bytes", "max_oom_rate")  # what a factory may declare it takes (``register_predictor``)


@dataclass(frozen=True)
class Registered:
    factory: Callable[..., Predictor]
    takes: frozenset[str]  # of BOUNDS


PREDICTORS: Registry[Registered] = Registry("sizing strategy")
ANCHORS: list[str] = []  # the published strategies our default is measured against


def register_predictor(name: str, *, anchor: bool = False, takes: Sequence[str] = ()) -> Callable[[F], F]:
    """Register a predictor factory under a stable name used in config, CLI and UI; ``takes``: which
    of the decision's bounds it is built with (the largest allocatable memory, the OOM-kill budget)."""
    unknown = set(takes) - set(BOUNDS)
    if unknown:
        raise ValueError(f"{name}: unknown bounds {sorted(unknown)}; known: {BOUNDS}")

    def add(factory: F) -> F:
        PREDICTORS.register(name, Registered(factory, frozenset(takes)))
        if anchor:
            ANCHORS.append(name)
        return factory

    return add


def predictor_names() -> list[str]:
    return sorted(PREDICTORS.names())


def quick_predictor_names() -> list[str]:
    """The strategies that decide in milliseconds (every one but those tagged slow)."""
    return [name for name in predictor_names() if not make_predictor(name).tags().slow]


def make_predictor(
    name: str,
    *,
    cap_bytes: int | None = None,
    floor_bytes: int = MIB,
    max_oom_rate: float | None = None,
    **params: Any,
) -> Predictor:
    """The named predictor, bounded to [floor, cap]; factories registered as taking ``cap_bytes`` or
    an OOM-kill budget (``max_oom_rate``) get them too."""
    registered = PREDICTORS.get(name)
    for key, value in (("cap_bytes", cap_bytes), ("max_oom_rate", max_oom_rate)):
        if value is not None and key in registered.takes:
            params[key] = value
    return WithBounds(registered.factory(**params), floor_bytes, cap_bytes)
