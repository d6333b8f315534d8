"""Which attempts the overview and the families table total: live ones (Airflow ran them), imported
ones (trace imports, core/model.py:IMPORTED_DAG_ID), or all. A saving is never shown over both: an
imported attempt ran at its own user's request, so mixed in it pulls the live saving towards 0."""

from __future__ import annotations

from typing import Any

from airflow_adaptive.store.api import HistoryStore, Source, TotalsQuery

ALL = "all"
SOURCE_CHOICES = (Source.LIVE.value, Source.IMPORTED.value, ALL)
SAVING_KEYS = ("saving_gb_h", "saving_fraction")


def chosen_source(store: HistoryStore, dags: frozenset[str] | None, asked: str | None) -> Source | None:
    """The source asked for (None: all of them); unasked, live when the user's DAGs ran any attempt
    (on any day), else imported (a store only imported into). ``asked`` is one of SOURCE_CHOICES."""
    if asked == ALL:
        return None
    if asked is not None:
        return Source(asked)
    _, live_families = store.family_totals(TotalsQuery(dags, source=Source.LIVE), limit=0)
    return Source.LIVE if live_families else Source.IMPORTED


def source_name(source: Source | None) -> str:
    return source.value if source is not None else ALL


def without_saving(totals: dict[str, Any]) -> dict[str, Any]:
    """Totals over both sources: their sums stand, a saving over both would mislead."""
    return {**totals, **dict.fromkeys(SAVING_KEYS)}
