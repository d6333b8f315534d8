"""Kubernetes memory quantities <-> bytes, checked at the boundary."""

from __future__ import annotations

import math
import re
from typing import Any

from kubernetes.utils import parse_quantity

from airflow_adaptive.core.units import MIB, as_pod_holds, whole_mib_up
from airflow_adaptive.exceptions import InvalidQuantityError

MAX_QUANTITY = 2**63 - 1
# The API server's quantity grammar (resource.Quantity), ASCII digits only.
_QUANTITY = re.compile(
    r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?"
)


def parse_memory_bytes(value: object, *, what: str = "memory") -> int:
    """Bytes of a quantity such as ``"1.5Gi"``, ``"500M"`` or ``1024``; never silently 0.

    Only what the API server accepts: its quantity syntax (ASCII, no spaces) and at most 2^63 - 1.
    """
    return math.ceil(_parsed(value, what, "512Mi, 1.5Gi, 2G", MAX_QUANTITY))


def parse_memory_amount(value: str, *, what: str, at_least: int = MIB) -> int:
    """Bytes of a memory amount a person typed (a command's ``--request``, an ``[adaptive]`` option),
    at least ``at_least``. Kubernetes reads ``1m`` as a thousandth of a byte and pods would round it
    up to 1 byte: below the least a container can run in, such a value is a mistaken unit."""
    parsed = _parsed(value, what, "512Mi, 1.5Gi, 2G", MAX_QUANTITY)
    if parsed < at_least:
        least = f"{at_least // MIB}Mi" if at_least >= MIB else f"{at_least} byte{'s' * (at_least != 1)}"
        hint = f"; did you mean {value[:-1]}Mi?" if value.endswith("m") else ""
        amount = f"{parsed:f}" if len(f"{parsed:f}") <= 20 else f"{parsed:g}"  # 0.001, 1e-400
        raise InvalidQuantityError(
            f"{what} {value} is {amount} bytes in Kubernetes units, less than {least}{hint}"
        )
    return math.ceil(parsed)


def parse_cpu_millicores(value: object, *, what: str = "cpu") -> int:
    """Millicores of a CPU quantity such as ``"500m"``, ``"2"`` or ``1.5`` (rounded up)."""
    return math.ceil(_parsed(value, what, "500m, 2", MAX_QUANTITY // 1000) * 1000)


def _parsed(value: object, what: str, examples: str, largest: int) -> Any:
    """The quantity as the client library's Decimal, positive and at most ``largest``."""
    if isinstance(value, bool) or value is None or value == "":
        raise InvalidQuantityError(f"{what}: {value!r} is not a Kubernetes quantity")
    if isinstance(value, str) and not _QUANTITY.fullmatch(value):
        raise InvalidQuantityError(
            f"{what}: {value!r} is not a Kubernetes quantity (e.g. {examples}){_unit_hint(value)}"
        )
    try:
        parsed = parse_quantity(value)
    except (ValueError, TypeError, ArithmeticError) as err:
        raise InvalidQuantityError(f"{what}: {value!r} is not a Kubernetes quantity ({err})") from None
    if not parsed.is_finite() or parsed <= 0:
        raise InvalidQuantityError(f"{what}: {value!r} must be a positive quantity")
    if parsed > largest:
        raise InvalidQuantityError(f"{what}: {value!r} is larger than any quantity Kubernetes holds")
    return parsed


def format_memory(value_bytes: int) -> str:
    """A quantity string for bytes, rounded up to whole MiB (what people read and write)."""
    return f"{whole_mib_up(value_bytes)}Mi"


def as_pod_gets_it(value_bytes: int | None) -> int | None:
    """Bytes as the pod's quantity carries them (whole MiB, rounded up): what the pod gets."""
    return None if value_bytes is None else as_pod_holds(value_bytes)


_BYTES_UNIT = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([kKMGTPE])(i?)B\s*")  # 8GB, 8 GiB, 512kB


def _unit_hint(value: str) -> str:
    """For bytes written as people and Nextflow write them (8GB, 8 GiB), the Kubernetes spellings."""
    found = _BYTES_UNIT.fullmatch(value)
    if found is None:
        return ""
    number, prefix, binary = found.groups()
    decimal = "k" if prefix in "kK" else prefix
    if binary:
        return f"; did you mean {number}{prefix.upper()}i?"
    return f"; did you mean {number}{prefix.upper()}i (binary, as Nextflow's {prefix}B) or {number}{decimal} (decimal)?"
