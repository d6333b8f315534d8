"""Attempts that could not be recorded wait here as JSON files until the store is back."""

from __future__ import annotations

import json
import logging
import os
import uuid
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from airflow_adaptive.core.model import ExitReason, Observation, PeakKind, TaskKey, Usage

log = logging.getLogger(__name__)


def to_json(obs: Observation) -> str:
    data = asdict(obs)
    data["exit_reason"] = obs.exit_reason.value
    data["usage"]["peak_kind"] = obs.usage.peak_kind.value
    data["finished_at"] = obs.finished_at.isoformat() if obs.finished_at else None
    return json.dumps(data)


def from_json(text: str) -> Observation:
    data: dict[str, Any] = json.loads(text)
    usage = dict(data.pop("usage"))
    usage["peak_kind"] = PeakKind(usage["peak_kind"])
    finished = data.pop("finished_at")
    return Observation(
        key=TaskKey(**data.pop("key")),
        usage=Usage(**usage),
        exit_reason=ExitReason(data.pop("exit_reason")),
        finished_at=datetime.fromisoformat(finished) if finished else None,
        **data,
    )


class Spool:
    """A folder of pending observations, one file each, written atomically."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self.quarantine_folder = self.folder / "quarantine"  # attempts refused for good, kept aside

    def put(self, obs: Observation) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        final = self.folder / f"{uuid.uuid4().hex}.json"
        tmp = final.with_suffix(".tmp")
        tmp.write_text(to_json(obs))
        tmp.replace(final)
        return final

    def quarantine(self, path: Path, reason: str) -> Path:
        """Move an attempt the store refused for good aside, with the reason beside it (kept, not retried)."""
        self.quarantine_folder.mkdir(parents=True, exist_ok=True)
        target = self.quarantine_folder / path.name
        path.replace(target)
        target.with_suffix(".reason").write_text(reason + "\n")
        return target

    def quarantined(self) -> int:
        folder = self.quarantine_folder
        return len(list(folder.glob("*.json"))) if folder.is_dir() else 0

    def pending(self) -> list[tuple[Path, Observation]]:
        try:
            names = sorted(self.folder.glob("*.json")) if self.folder.is_dir() else []
        except OSError as err:  # a parent folder this user may not search
            log.warning("airflow-adaptive: spool %s cannot be read: %s", self.folder, err)
            return []
        found = []
        for path in names:
            try:
                found.append((path, from_json(path.read_text())))
            except (ValueError, KeyError, TypeError, OSError) as err:  # OSError: a folder, no permission
                log.warning("airflow-adaptive: unreadable spooled attempt %s left in place: %s", path, err)
        return found
