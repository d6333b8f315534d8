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
        from airflow_adaptive.advisor import STORE_ERRORS
        from airflow_adaptive.config import get_settings
        from airflow_adaptive.store.access import open_repository

        settings = get_settings()
        try:
            families = open_repository(settings.history_conn_id, settings.store_timeout_seconds).families()
        except STORE_ERRORS as err:
            return {
                "status": "degraded",
                "store": f"unavailable: {type(err).__name__}",
                "version": __version__,
            }
        return {"status": "ok", "store": "ok", "task_families": len(families), "version": __version__}

    @app.get("/families")
    def families() -> list[dict[str, Any]]:
        """Task families with their attempt and OOM-kill counts."""
        from airflow_adaptive.config import get_settings
        from airflow_adaptive.store.access import open_repository

        settings = get_settings()
        repo = open_repository(settings.history_conn_id, settings.store_timeout_seconds)
        return [{"task_family": f, "attempts": n, "oom_kills": k} for f, n, k in repo.families()]

    return app
