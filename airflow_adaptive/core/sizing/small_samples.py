"""Prediction bounds for a family with too few peaks to judge its OOM budget.

A quantile of n peaks cannot tell a 1-in-50 peak until n is about 50. Until a family has
``1 / budget`` peaks, ``adaptive`` allocates at least the one-sided prediction bound for the next
peak at ``1 - budget``: log-normal over the peaks, with Student's t and the spread pooled with a
prior one, or, when a line on input size was chosen, that line's own prediction interval
(``lines.line_bound``).
"""

from __future__ import annotations

import math

import numpy as np

from .lines import t_quantile


def lognormal_bound(
    peaks: np.ndarray, budget: float | None, prior_log_spread: float, prior_weight: float
) -> float:
    """``exp(m + t(1 - budget; n - 1 + k) * s * sqrt(1 + 1/n))`` over the log peaks, ``s`` pooled
    from their squares about ``m`` and ``k`` degrees of freedom of ``prior_log_spread``; 0 once
    ``1 / budget`` peaks are known or with no budget, infinite with a budget of 0."""
    if budget is None or peaks.size >= 1.0 / max(budget, 1e-9):
        return 0.0
    if budget <= 0.0:
        return math.inf
    logs = np.log(np.maximum(peaks, 1.0))
    df = peaks.size - 1 + prior_weight
    squares = float(((logs - logs.mean()) ** 2).sum())
    spread = math.sqrt((prior_weight * prior_log_spread**2 + squares) / df)
    exponent = float(logs.mean()) + t_quantile(1.0 - budget, df) * spread * math.sqrt(1.0 + 1.0 / peaks.size)
    return math.exp(min(exponent, 700.0))  # e^700 bytes: past any cap, short of overflow
