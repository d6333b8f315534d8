"""What the store's errors tell a user to do: a missing table asks for the migration, a missing
database or role does not (``airflow db migrate`` makes tables and columns, not those)."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError, ProgrammingError

from airflow_adaptive.cli import main
from airflow_adaptive.exceptions import HistoryUnavailableError
from airflow_adaptive.store.errors import map_errors
from tests.conftest import POSTGRES_URL


@pytest.mark.parametrize(
    ("driver_says", "hint"),
    [
        ('FATAL:  database "nope" does not exist', "(create that database, then run airflow db migrate)"),
        ("(1049, \"Unknown database 'nope'\")", "(create that database, then run airflow db migrate)"),
        ('FATAL:  role "airflow" does not exist', "(check the user in sql_alchemy_conn)"),
        ('relation "adaptive_family" does not exist', "(run airflow db migrate?)"),
        ('column adaptive_family.rollup of relation "adaptive_family" does not exist', "(run airflow db migrate?)"),
        ("no such table: adaptive_family", "(run airflow db migrate?)"),
        ("(1146, \"Table 'airflow.adaptive_family' doesn't exist\")", "(run airflow db migrate?)"),
        ("unable to open database file",
         "(the folder of the SQLite file in sql_alchemy_conn must exist and be writable)"),
        ("could not connect to server: Connection refused", ""),
    ],
)  # fmt: skip
def test_each_missing_thing_gets_its_own_hint(driver_says: str, hint: str) -> None:
    error = OperationalError if "exist" not in driver_says or "FATAL" in driver_says else ProgrammingError
    with pytest.raises(HistoryUnavailableError) as raised, map_errors():
        raise error("SELECT 1", {}, Exception(driver_says))
    said = str(raised.value)
    assert said.startswith(f"history store unavailable: {driver_says}")
    assert said.endswith(hint) and said.count("(") - driver_says.count("(") == (1 if hint else 0)


def test_a_database_the_server_does_not_have_is_one_line_without_the_migration(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same, from the real PostgreSQL server, through the CLI."""
    from airflow_adaptive.store import access

    missing = create_engine(make_url(POSTGRES_URL).set(database="adaptive_no_such_database"))
    try:
        missing.connect().close()
    except OperationalError as err:
        if "does not exist" not in str(err):
            pytest.skip(f"no PostgreSQL server to ask: {str(err).splitlines()[0]}")
    monkeypatch.setattr(access, "airflow_engine", lambda: missing)
    assert main(["decide", "--task-family", "genomics.align"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("airflow-adaptive: error: ") and "Traceback" not in line
    assert 'database "adaptive_no_such_database" does not exist' in line
    assert "(create that database, then run airflow db migrate)" in line and "migrate?" not in line
