"""Declared inputs: what earlier attempts read and where staged copies are; soft state, never raises."""

from __future__ import annotations

from collections.abc import Sequence

from airflow_adaptive.advice.session import StoreSession
from airflow_adaptive.core.locality import InputState, InputUse
from airflow_adaptive.exceptions import HistoryRejectedError, HistoryUnavailableError
from airflow_adaptive.failopen import first_line, warn_once
from airflow_adaptive.store.api import HistoryStore


class InputAdvice:
    def __init__(self, session: StoreSession[HistoryStore]) -> None:
        self.session = session

    def input_state(self, uris: Sequence[str], keys: Sequence[str]) -> InputState:
        """Earlier reads, sizes and holders of declared inputs; nothing known when the store is down."""
        try:
            return self.session.store().input_state(uris, keys)
        except HistoryUnavailableError as err:
            self.session.unavailable(err)
            return InputState()

    def record_inputs(
        self, node: str | None, uses: Sequence[InputUse], evicted: Sequence[str], dag_id: str | None = None
    ) -> None:
        """Where inputs are cached now, and which DAG read them. Soft state: when it cannot be written,
        a later pod misses."""
        if not uses and not evicted:
            return
        try:
            self.session.store().record_inputs(node, uses, evicted, dag_id)
        except (HistoryUnavailableError, HistoryRejectedError) as err:
            warn_once(f"input cache locations not recorded: {first_line(err)}")
