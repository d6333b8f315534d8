"""FastAPI sub-app mounted by the api-server at ``/adaptive``; every route needs a logged-in user."""

from __future__ import annotations

from typing import Any

from fastapi import Depends, FastAPI


def create_app() -> FastAPI:
    from airflow.api_fastapi.core_api.security import requires_authenticated

    from airflow_adaptive import __version__

    app = FastAPI(
        title="airflow-adaptive",
        version=__version__,
        dependencies=[Depends(requires_authenticated())],
    )

    @app.get("/health")
    def health() -> dict[str, Any]:
        """Whether the history store is reachable from the api-server."""
        from airflow_adaptive.config import get_settings
        from airflow_adaptive.exceptions import HistoryUnavailableError
        from airflow_adaptive.store.access import open_store

        try:
            families = open_store(get_settings()).family_count()
        except HistoryUnavailableError as err:
            return {"status": "degraded", "store": str(err), "version": __version__}
        return {"status": "ok", "store": "ok", "task_families": families, "version": __version__}

    @app.get("/families")
    def families() -> list[dict[str, Any]]:
        """Task families with their attempt and OOM-kill counts."""
        from airflow_adaptive.config import get_settings
        from airflow_adaptive.store.access import open_store

        rollups = open_store(get_settings()).families(limit=1000)
        return [
            {"task_family": r.task_family, "attempts": r.attempts, "oom_kills": r.oom_killed} for r in rollups
        ]

    return app
