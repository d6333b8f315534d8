"""What every importer returns: the observations and the rows it had to skip."""

from __future__ import annotations

from dataclasses import dataclass, field

from airflow_adaptive.core.model import Observation


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
