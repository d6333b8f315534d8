"""A first allocation for a family with neither history nor a request, from other families' peaks."""

from __future__ import annotations

from ..units import format_bytes
from .base import ColdStart
from .prior import PeakPrior
from .small_samples import peaks_needed


def guess_from_prior(prior: PeakPrior, target: float, default_bytes: int) -> ColdStart | None:
    """The quantile of other families' peaks that the OOM target allows (P99 at 1 %: their tasks
    outgrew it that rarely), + the prior's margin, never above ``default_bytes``, which stands in for
    the missing request (as a request is never raised before a kill): a store of larger workflows
    does not inflate a new one. No guess (the pod keeps no limit, as its user asked) until the store
    holds the ``1 / target`` peaks that quantile needs, as the small-sample bound waits for a
    family's own. None: the prior cannot answer."""
    quantile, needed = 1.0 - target, peaks_needed(target)
    if prior.peaks_seen < needed:
        return ColdStart(
            None,
            f"no history and no request: a P{quantile * 100:g} of other task families' peaks "
            f"needs {needed} of them, the store holds {prior.peaks_seen}",
        )
    found = prior.peak_bytes(quantile)
    if found is None:
        return None
    basis = (
        f"no history and no request: P{quantile * 100:g} of the {prior.peaks_seen} peaks of other task "
        f"families' tasks (the OOM target) + {prior.margin_fraction:.0%}, {format_bytes(found)}"
    )
    if found > default_bytes:
        return ColdStart(float(default_bytes), basis + f", at most {format_bytes(default_bytes)}")
    return ColdStart(found, basis)
