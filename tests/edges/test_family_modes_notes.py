"""What ``[adaptive] family_modes`` rules say when read: a pattern that reads as a DAG id."""

from __future__ import annotations

import logging

import pytest

from airflow_adaptive.config import get_settings


def test_a_family_modes_rule_naming_a_dag_is_said_once_with_the_pattern_meant(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """'etl_pipeline=enforce' reads as the DAG's tasks but matches only a family of that very name."""
    monkeypatch.setenv(
        "AIRFLOW__ADAPTIVE__FAMILY_MODES",
        "etl_pipeline=enforce, etl.*=observe, bwa=observe, NFCORE_CHIPSEQ:CHIPSEQ:BWA_MEM=enforce, x[12]=off, "
        "rapport_données=observe",
    )  # an imported Nextflow family (no dot) and a pattern are no DAG id: not said; Airflow's ids may be Unicode
    get_settings.cache_clear()
    with caplog.at_level(logging.WARNING):
        rules = get_settings().family_modes
        get_settings.cache_clear()
        get_settings()  # read again: said once per process
    assert [r.pattern for r in rules][:3] == ["etl_pipeline", "etl.*", "bwa"]  # still kept, as written
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 3 and all(m.endswith("; the rule is kept as written") for m in said)
    assert "if it is a DAG id, write 'etl_pipeline.*'" in said[0] and "write 'bwa.*'" in said[1]
    assert "write 'rapport_données.*'" in said[2]
