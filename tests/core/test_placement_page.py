"""The family page's placement line: the task labels once, above the order."""

from __future__ import annotations

from typing import Any

from airflow_adaptive.kubernetes.names import PLACEMENT_ANNOTATION
from tests.conftest import sql_store
from tests.core.test_placement import build, cluster, history


def test_the_family_page_shows_the_labels_once(engine: Any) -> None:
    """The page writes "Task labels: …" above the order: the order's text does not repeat them, as
    the pod's annotation (read alone) does."""
    from airflow_adaptive.config import get_settings
    from airflow_adaptive.plugin import views

    cluster(engine)
    history(engine, "cpu-heavy", cores=7.5, peak=200 * 1024**2)
    history(engine, "light", cores=0.1, peak=100 * 1024**2)
    detail = views.family_detail(sql_store(engine), get_settings(), None, "cpu-heavy", 100)
    assert detail is not None and detail["labels"] == {"cpu": 3, "memory": 3, "io": 1}
    assert detail["placement"].startswith("prefer group 3") and "task labels" not in detail["placement"]
    assert "task labels cpu=3" in build("cpu-heavy").metadata.annotations[PLACEMENT_ANNOTATION]
