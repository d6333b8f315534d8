"""What every importer returns, and the checks they share."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from airflow_adaptive.core.model import Observation

MISSING = {"", "-", "NA", "nan", "NaN", "null", "None"}


@dataclass(frozen=True)
class SkippedRow:
    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


@dataclass
class ImportResult:
    observations: list[Observation] = field(default_factory=list)
    skipped: list[SkippedRow] = field(default_factory=list)


def numeric_columns(frame: pd.DataFrame, columns: tuple[str, ...]) -> tuple[dict[str, pd.Series], pd.Series]:
    """Each column as numbers (missing values NaN) and, per row, a note of values that are not numbers.

    A missing column counts as all missing; negative numbers are malformed, never clipped to zero.
    """
    numbers: dict[str, pd.Series] = {}
    bad = pd.Series("", index=frame.index)
    for column in columns:
        raw = (
            frame[column].astype(str).str.strip()
            if column in frame.columns
            else pd.Series("", index=frame.index)
        )
        missing = raw.isin(MISSING)
        values = pd.to_numeric(raw.where(~missing), errors="coerce")
        invalid = (values.isna() & ~missing) | (values < 0)
        bad = bad.where(~invalid, bad + f"{column}=" + raw + " ")
        numbers[column] = values.where(~invalid)
    return numbers, bad


def value(numbers: dict[str, pd.Series], column: str, pos: int) -> float | None:
    number = numbers[column].iat[pos]
    return None if pd.isna(number) else float(number)
