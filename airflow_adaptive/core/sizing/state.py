"""A fitted predictor's learnt state as a small JSON document, and back.

The store fits a family's predictor when an attempt is recorded and keeps this
document; a decision restores it instead of refitting. Following
scikit-learn's convention, the learnt state is exactly the attributes ending
in ``_`` (numbers, arrays, tuples, a random generator's state); parameters
come from the registry, so a document only restores into the predictor built
the same way (``model_version`` in :mod:`core.learn` checks that).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .base import Predictor, Wrapper

STATE_FORMAT = 13  # bump when the encoding or any predictor's learnt attributes change


NUMERIC_KINDS = "biuf"  # bool, integer and float arrays: their lists are plain JSON when finite


def _encode(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        if value.dtype.kind in NUMERIC_KINDS and (value.dtype.kind != "f" or np.isfinite(value).all()):
            items = value.tolist()  # plain numbers: no walk element by element (a window is 500 tasks)
        else:
            items = [_encode(v) for v in value.tolist()]
        return {"nd": items, "dtype": str(value.dtype), "shape": value.shape}
    if isinstance(value, np.random.Generator):
        return {"rng": value.bit_generator.state}
    if isinstance(value, tuple):
        return {"tuple": [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return {"float": repr(value)}  # JSON (and PostgreSQL) have no NaN or Infinity
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot store a fitted attribute of type {type(value).__name__}")


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "nd" in value:
        dtype = np.dtype(value["dtype"])
        if dtype.kind in NUMERIC_KINDS:
            try:  # plain numbers, as a finite array is stored: numpy reads the list at once
                return np.asarray(value["nd"], dtype=dtype).reshape(value["shape"])
            except (TypeError, ValueError):  # a non-finite number, stored as {"float": ...}
                pass
        flat = [_decode(v) for v in value["nd"]]
        return np.asarray(flat, dtype=dtype).reshape(value["shape"])
    if "rng" in value:
        generator = np.random.default_rng()
        generator.bit_generator.state = value["rng"]
        return generator
    if "tuple" in value:
        return tuple(_decode(v) for v in value["tuple"])
    if "float" in value:
        return float(value["float"])
    raise ValueError(f"unknown fitted value {sorted(value)}")


def fitted_state(predictor: Predictor) -> dict[str, Any]:
    """The learnt attributes of ``predictor`` (and of any predictor it wraps), JSON-ready."""
    learnt = {
        name: _encode(value)
        for name, value in vars(predictor).items()
        if name.endswith("_") and not name.startswith("_")
    }
    state: dict[str, Any] = {"learnt": learnt}
    if isinstance(predictor, Wrapper):
        state["inner"] = fitted_state(predictor.inner)
    return state


def restore_state(predictor: Predictor, state: dict[str, Any]) -> Predictor:
    """``predictor`` (freshly built, unfitted) as it was when ``state`` was taken."""
    for name, value in state["learnt"].items():
        if not (name.endswith("_") and name.isidentifier()):
            raise ValueError(f"not a fitted attribute: {name!r}")
        setattr(predictor, name, _decode(value))
    if isinstance(predictor, Wrapper):
        restore_state(predictor.inner, state["inner"])
    return predictor
