"""Kubernetes memory quantities <-> bytes, checked at the boundary."""

from __future__ import annotations

import math

from kubernetes.utils import parse_quantity

from airflow_adaptive.exceptions import InvalidQuantityError

MIB = 1024**2


def parse_memory_bytes(value: object, *, what: str = "memory") -> int:
    """Bytes of a quantity such as ``"1.5Gi"``, ``"500M"`` or ``1024``; never silently 0."""
    if isinstance(value, bool) or value is None or value == "":
        raise InvalidQuantityError(f"{what}: {value!r} is not a Kubernetes quantity")
    try:
        parsed = parse_quantity(value)
    except (ValueError, TypeError, ArithmeticError) as err:
        raise InvalidQuantityError(f"{what}: {value!r} is not a Kubernetes quantity ({err})") from None
    if not parsed.is_finite() or parsed <= 0:
        raise InvalidQuantityError(f"{what}: {value!r} must be a positive quantity")
    return math.ceil(parsed)


def format_memory(value_bytes: int) -> str:
    """A quantity string for bytes, rounded up to whole MiB (what people read and write)."""
    return f"{math.ceil(value_bytes / MIB)}Mi"
