"""Retry policies: how much memory the try after an OOM kill gets."""

from __future__ import annotations

from collections.abc import Callable

from ..registry import Registry
from ..units import MIB

RetryPolicy = Callable[[int], int]
"""Maps the limit at which a try was OOM-killed (bytes) to the next try's memory."""


def double(killed_at_bytes: int) -> int:
    """Phung's double allocation / Nextflow's ``memory * task.attempt``."""
    return 2 * killed_at_bytes


def vpa_bump(killed_at_bytes: int) -> int:
    """Kubernetes VPA after an OOM: max(used + 100 MiB, used x 1.2)."""
    return max(killed_at_bytes + 100 * MIB, int(killed_at_bytes * 1.2))


STRATEGY_RETRY = "strategy"  # not a policy of its own: the sizing strategy's ``retry`` answers
RETRY_POLICIES: Registry[RetryPolicy] = Registry("OOM retry policy")
RETRY_POLICIES.register("double", double)
RETRY_POLICIES.register("vpa-bump", vpa_bump)


def get_retry_policy(name: str) -> RetryPolicy:
    return RETRY_POLICIES.get(name)
