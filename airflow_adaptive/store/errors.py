"""Store trouble as the provider's own errors, one line each, with what the user can do about it."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

from sqlalchemy.exc import DataError, IntegrityError, NoSuchTableError, SQLAlchemyError

from airflow_adaptive.exceptions import HistoryRejectedError, HistoryUnavailableError

# What a missing thing asks of the user, first match wins: ``airflow db migrate`` makes tables and
# columns, not databases nor roles (PostgreSQL, MySQL and SQLite wording).
_HINTS = (
    (re.compile(r'database "[^"]*" does not exist|unknown database', re.I),
     "create that database, then run airflow db migrate"),
    (re.compile(r'role "[^"]*" does not exist|access denied for user', re.I), "check the user in sql_alchemy_conn"),
    (re.compile(r"unable to open database file", re.I),  # SQLite: its file's folder is missing or read-only
     "the folder of the SQLite file in sql_alchemy_conn must exist and be writable"),
    (re.compile(r'no such (table|column)|(relation|column) "[^"]*".* does not exist|doesn\'t exist|unknown column',
                re.I), "run airflow db migrate?"),
)  # fmt: skip


@contextlib.contextmanager
def map_errors() -> Iterator[None]:
    """Store trouble as the provider's own errors, one line each (httpx's ``map_exceptions`` idea)."""
    try:
        yield
    except (DataError, IntegrityError, OverflowError) as err:  # OverflowError: SQLite's driver on a huge int
        raise HistoryRejectedError(f"the history store refused the data: {_first_line(err)}") from err
    except SQLAlchemyError as err:
        raise HistoryUnavailableError(f"history store unavailable: {_with_hint(err)}") from err
    except OSError as err:
        raise HistoryUnavailableError(f"history store unavailable: {err}") from err


def _with_hint(err: SQLAlchemyError) -> str:
    message = _first_line(err)
    if isinstance(err, NoSuchTableError):  # reflection names only the table
        message = f"no such table: {message}"
    hint = next((hint for pattern, hint in _HINTS if pattern.search(message)), None)
    return f"{message} ({hint})" if hint else message


def _first_line(err: BaseException) -> str:
    original = getattr(err, "orig", None) or err
    return (str(original).strip().splitlines() or [type(original).__name__])[0][:300]
