"""Recording an attempt and noting it while it runs: never raises, loses nothing (spooled)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from airflow_adaptive.advice.session import StoreSession
from airflow_adaptive.config import AdaptiveSettings
from airflow_adaptive.core.model import Observation, TaskKey
from airflow_adaptive.exceptions import HistoryRejectedError, HistoryUnavailableError
from airflow_adaptive.failopen import first_line, warn_once
from airflow_adaptive.store.api import SizingStore
from airflow_adaptive.store.spool import Spool

log = logging.getLogger(__name__)
ASK_AGAIN_AFTER_S = 60.0  # a record this long after the store failed asks it again


class RecordingAdvice:
    def __init__(self, settings: AdaptiveSettings, session: StoreSession[SizingStore]) -> None:
        self.settings = settings
        self.session = session

    def started(self, task_family: str, key: TaskKey, *, running: bool = True) -> None:
        """Note that this attempt's pod is being created (``running=False``: a caller that notes it
        again when it runs) or runs, until it is recorded; never raises."""
        try:
            self.session.store().mark_unfinished(key, task_family, self.session.clock(), running=running)
        except (HistoryUnavailableError, HistoryRejectedError) as err:
            reason = f"attempt not noted as started: {first_line(err)}"
            warn_once(reason, "decisions do not count it among the family's unfinished attempts")

    def ended_unrecorded(self, key: TaskKey) -> None:
        """Remove the note of an attempt that ended without a record (killed, no pod); never raises."""
        try:
            self.session.store().unmark_unfinished(key)
        except (HistoryUnavailableError, HistoryRejectedError) as err:
            reason = f"unrecorded attempt not cleared: {first_line(err)}"
            warn_once(reason, "it counts as unfinished until pruned")

    def record(self, observation: Observation) -> bool:
        """Record an attempt, then any spooled ones one by one; spool it when the store is unavailable."""
        spool = Spool(self.settings.spool_dir)
        self.session.ask_again_after(ASK_AGAIN_AFTER_S)
        try:
            self.session.store().record([observation])
        except (HistoryRejectedError, ValueError, TypeError) as err:  # bad values: keep it aside, go on
            log.error(
                "airflow-adaptive: attempt %s rejected, %s: %s",
                observation.key,
                _set_aside(spool, observation, err),
                err,
            )
            return False
        except HistoryUnavailableError as err:
            reason = self.session.unavailable(err)
            try:
                spool.put(observation)
                log.warning(
                    "airflow-adaptive: attempt %s spooled to %s: %s", observation.key, spool.folder, reason
                )
            except (OSError, TypeError, ValueError) as spool_err:  # no spool, or values JSON cannot hold
                log.error("airflow-adaptive: attempt %s lost: %s", observation.key, spool_err)
            return False
        self.drain(spool)
        return True

    def drain(self, spool: Spool) -> int:
        """Write spooled attempts one by one; a permanently rejected one is quarantined, not retried."""
        written = 0
        for path, obs in spool.pending():
            try:
                self.session.store().record([obs])
            except (HistoryRejectedError, ValueError, TypeError) as err:
                if _moved(spool.quarantine, path, str(err)):
                    log.error("airflow-adaptive: spooled attempt %s rejected, quarantined: %s", obs.key, err)
                continue
            except HistoryUnavailableError:
                break
            written += _moved(path.unlink, True)  # missing_ok: another drain wrote it
        return written


def _set_aside(spool: Spool, observation: Observation, rejected: Exception) -> str:
    """Quarantine a rejected attempt; where it went, said for the log (never raises)."""
    try:
        path = spool.put(observation)
    except (OSError, TypeError, ValueError) as err:  # no spool to write, or values JSON cannot hold
        return f"lost (spool: {err})"
    if _moved(spool.quarantine, path, str(rejected)):
        return f"kept in {spool.quarantine_folder}"
    return f"left in {spool.folder}, to be tried again"


def _moved(step: Callable[..., object], *args: object) -> bool:
    """Run a spool file's move or removal; a spool that cannot be written is said once, not raised."""
    try:
        step(*args)
    except OSError as err:
        warn_once(
            f"spool not writable: {err.strerror or type(err).__name__}",
            "spooled attempts stay where they are",
        )
        return False
    return True
