"""Totals over the per-family, per-DAG, per-day rows: what the UI aggregates, server-side."""

from __future__ import annotations

from dataclasses import fields
from datetime import date
from typing import Any

from sqlalchemy import Connection, func, select

from airflow_adaptive.core.model import IMPORTED_DAG_ID
from airflow_adaptive.core.normalise import fit_key, without_nul
from airflow_adaptive.core.rollup import DayTotals
from airflow_adaptive.exceptions import InvalidSettingError
from airflow_adaptive.store.api import FAMILY_SORTS, FamilyTotals, Source, TotalsQuery
from airflow_adaptive.store.tables import family_day

_NUMBERS = [f.name for f in fields(DayTotals)]


def _where(query: TotalsQuery) -> list[Any]:
    conditions: list[Any] = [family_day.c.attempts != 0]
    if query.dag_ids is not None:
        conditions.append(family_day.c.dag_id.in_(sorted(query.dag_ids)))
    if query.start is not None:
        conditions.append(family_day.c.day >= query.start)
    if query.end is not None:
        conditions.append(family_day.c.day <= query.end)
    if query.source is Source.IMPORTED:
        conditions.append(family_day.c.dag_id == IMPORTED_DAG_ID)
    elif query.source is Source.LIVE:
        conditions.append(family_day.c.dag_id != IMPORTED_DAG_ID)
    if query.task_family is not None:
        conditions.append(family_day.c.task_family == fit_key(query.task_family))
    if query.search:
        pattern = (
            "%"
            + without_nul(query.search).replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            + "%"
        )
        conditions.append(family_day.c.task_family.ilike(pattern, escape="\\"))
    return conditions


def _totals(row: Any) -> DayTotals:
    return DayTotals(*(type(getattr(DayTotals(), n))(getattr(row, n) or 0) for n in _NUMBERS))


def day_totals(conn: Connection, query: TotalsQuery) -> list[tuple[date, DayTotals]]:
    sums = [func.sum(family_day.c[n]).label(n) for n in _NUMBERS]
    stmt = (
        select(family_day.c.day, *sums)
        .where(*_where(query))
        .group_by(family_day.c.day)
        .order_by(family_day.c.day)
    )
    return [(_day(row.day), _totals(row)) for row in conn.execute(stmt)]


def family_totals(
    conn: Connection, query: TotalsQuery, sort: str, descending: bool, limit: int, offset: int
) -> tuple[list[FamilyTotals], int]:
    if sort not in FAMILY_SORTS:
        raise InvalidSettingError(f"sort must be one of {', '.join(FAMILY_SORTS)}")
    sums = [func.sum(family_day.c[n]).label(n) for n in _NUMBERS]
    last = func.max(family_day.c.day).label("last_day")
    grouped = (
        select(family_day.c.task_family, *sums, last).where(*_where(query)).group_by(family_day.c.task_family)
    )
    page = grouped.subquery()
    # names sort as a reader expects, case aside (NFCORE_... beside lower-case tool names); then exactly
    key = func.lower(page.c.task_family) if sort == "task_family" else page.c[sort]
    order = [key.desc() if descending else key.asc(), page.c.task_family]
    stmt = select(page).order_by(*order).limit(limit).offset(offset)
    found = [FamilyTotals(r.task_family, _totals(r), _day(r.last_day)) for r in conn.execute(stmt)]
    count = conn.execute(select(func.count()).select_from(page)).scalar() or 0
    return found, int(count)


def _day(value: Any) -> date:
    return value if isinstance(value, date) else date.fromisoformat(str(value)[:10])
