"""FastAPI sub-app mounted by the api-server at ``/adaptive``: the UI page and its JSON endpoints.

Every route needs a logged-in Airflow user (a Bearer token or the UI's own ``_token`` cookie,
so the page works inside Airflow's iframe) and only reads: the JSON routes answer 401 without one,
the page sends the browser to Airflow's login page and back. FastAPI's ``/docs``, ``/redoc`` and
``/openapi.json`` are off: they would answer without login. A user sees only task families and
attempts of DAGs the auth manager lets them read.
"""

# No ``from __future__ import annotations``: FastAPI reads these routes' annotations at run time,
# and some name objects local to ``create_app``.
import re
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from airflow.api_fastapi.common.db.common import SessionDep
from airflow.api_fastapi.core_api.security import GetUserDep, bearer_scheme, get_user
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, Response
from fastapi.security import HTTPAuthorizationCredentials
from pydantic import BeforeValidator

if TYPE_CHECKING:
    from airflow_adaptive.store.api import Source

STATIC = Path(__file__).parent / "static"
ASSETS = {  # the only files served: name -> media type
    "index.html": "text/html",
    "app.js": "text/javascript",
    "format.js": "text/javascript",
    "whatif.js": "text/javascript",
    "runtimes.js": "text/javascript",
    "controls.js": "text/javascript",
    "frame.js": "text/javascript",
    "app.css": "text/css",
    "vendor/uplot/uPlot.iife.min.js": "text/javascript",
    "vendor/uplot/uPlot.min.css": "text/css",
    "vendor/uplot/LICENSE": "text/plain",
}


def readable_dags(user: Any) -> frozenset[str] | None:
    """None when the user may read every DAG; else the DAG ids the auth manager allows."""
    from airflow.api_fastapi.app import get_auth_manager

    manager = get_auth_manager()
    if manager.is_authorized_dag(method="GET", user=user):
        return None
    return frozenset(manager.get_authorized_dag_ids(user=user, method="GET"))


def _readable(user: GetUserDep) -> frozenset[str] | None:
    return readable_dags(user)


Bearer = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)]


async def _page_user(request: Request, bearer: Bearer) -> Any:
    """The logged-in user, or None (no session, or an expired one): the page then redirects."""
    try:
        return await get_user(request, None, bearer)
    except HTTPException:
        return None


# Module level: FastAPI resolves these (string) annotations in the module's namespace.
PageUser = Annotated[Any, Depends(_page_user)]
Dags = Annotated[frozenset[str] | None, Depends(_readable)]


def _iso_day(value: object) -> object:
    """A day only as YYYY-MM-DD: pydantic would also read ``86400`` as a Unix time."""
    if isinstance(value, str) and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        raise ValueError("a day is written YYYY-MM-DD")
    return value


Start = Annotated[date | None, BeforeValidator(_iso_day), Query(description="first day (UTC), YYYY-MM-DD")]
End = Annotated[date | None, BeforeValidator(_iso_day), Query(description="last day (UTC), YYYY-MM-DD")]
# No length cap: the store keeps a name over 250 characters as a prefix plus a hash of the whole.
FamilyName = Annotated[str, Query(description="the task family, exactly as recorded")]
FAMILY_ROUTES = "/adaptive/api/family?name=… and /adaptive/api/family/whatif?name=…"


def _store() -> Any:
    from airflow_adaptive.config import get_settings
    from airflow_adaptive.store.access import open_store

    return open_store(get_settings())


Shown = Annotated[
    str | None,
    Query(
        description="live (Airflow ran them), imported (trace imports) or all; unset: live if any, else imported"
    ),
]


def _source(store: Any, readable: frozenset[str] | None, asked: str | None) -> "Source | None":
    from airflow_adaptive.plugin.sources import SOURCE_CHOICES, chosen_source

    if asked is not None and asked not in SOURCE_CHOICES:
        raise HTTPException(400, f"source must be one of {', '.join(SOURCE_CHOICES)}")
    return chosen_source(store, readable, asked)


def _date_range(start: date | None, end: date | None) -> tuple[date | None, date | None]:
    if start is not None and end is not None and start > end:
        raise HTTPException(400, f"start {start} is after end {end}")
    return start, end


def create_app() -> FastAPI:
    from airflow.api_fastapi.core_api.security import requires_authenticated

    from airflow_adaptive.exceptions import HistoryUnavailableError
    from airflow_adaptive.version import __version__

    app = FastAPI(
        title="airflow-adaptive", version=__version__, docs_url=None, redoc_url=None, openapi_url=None
    )

    @app.exception_handler(HistoryUnavailableError)
    def unavailable(request: Any, err: HistoryUnavailableError) -> JSONResponse:
        return JSONResponse({"detail": str(err)}, status_code=503)

    @app.get("/ui")
    def page(request: Request, user: PageUser) -> Response:
        """The page; without a session, Airflow's login page, which comes back here."""
        if user is None:
            from airflow.api_fastapi.app import get_auth_manager

            back = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse(get_auth_manager().get_url_login(next_url=back), status_code=303)
        return FileResponse(STATIC / "index.html", media_type="text/html")

    # Everything else is data: 401 JSON without a logged-in user, for scripts and the page's fetches.
    api = APIRouter(dependencies=[Depends(requires_authenticated())])
    _page_routes(api)
    _api_routes(api)
    _family_routes(api)
    _queue_routes(api)
    app.include_router(api)
    return app


def _page_routes(app: APIRouter) -> None:
    from airflow_adaptive.exceptions import HistoryUnavailableError
    from airflow_adaptive.store.api import TotalsQuery
    from airflow_adaptive.version import __version__

    @app.get("/health")
    def health(readable: Dags) -> dict[str, Any]:
        """Whether the history store is reachable from the api-server, and how many families the
        user may see."""
        try:
            store = _store()
            families = (
                store.family_count()
                if readable is None
                else store.family_totals(TotalsQuery(readable), limit=0)[1]
            )
        except HistoryUnavailableError as err:
            return {"status": "degraded", "store": str(err), "version": __version__}
        return {"status": "ok", "store": "ok", "task_families": families, "version": __version__}

    @app.get("/families")
    def families(readable: Dags) -> list[dict[str, Any]]:
        """Task families with their attempt and OOM-kill counts (the first API; see /api/families)."""
        found, _ = _store().family_totals(TotalsQuery(readable), limit=1000)
        return [{"task_family": f.task_family, "attempts": f.totals.attempts,
                 "oom_kills": f.totals.oom_killed} for f in found]  # fmt: skip

    @app.get("/static/{name:path}")
    def asset(name: str) -> FileResponse:
        if name not in ASSETS:
            raise HTTPException(404, f"no asset {name!r}")
        return FileResponse(STATIC / name, media_type=ASSETS[name])


def _api_routes(app: APIRouter) -> None:
    from airflow_adaptive.config import get_settings
    from airflow_adaptive.plugin import views
    from airflow_adaptive.store.api import FAMILY_SORTS, TotalsQuery

    @app.get("/api/overview")
    def overview(
        readable: Dags, start: Start = None, end: End = None, source: Shown = None
    ) -> dict[str, Any]:
        dates, store = _date_range(start, end), _store()
        return views.overview(store, readable, *dates, _source(store, readable, source))

    @app.get("/api/families")
    def family_table(
        readable: Dags,
        start: Start = None,
        end: End = None,
        search: Annotated[str, Query(max_length=250)] = "",
        sort: Annotated[str, Query(description=", ".join(FAMILY_SORTS))] = "attempts",
        order: Annotated[str, Query(pattern="^(asc|desc)$")] = "desc",
        page: Annotated[int, Query(ge=1, le=100_000)] = 1,
        page_size: Annotated[int, Query(ge=1, le=200)] = 50,
        source: Shown = None,
    ) -> dict[str, Any]:
        if sort not in FAMILY_SORTS:
            raise HTTPException(400, f"sort must be one of {', '.join(FAMILY_SORTS)}")
        dates, store = _date_range(start, end), _store()
        query = TotalsQuery(readable, *dates, search=search, source=_source(store, readable, source))
        return views.families_page(
            store, get_settings(), readable, query, sort=sort, descending=order == "desc",
            limit=page_size, offset=(page - 1) * page_size,
        )  # fmt: skip

    @app.get("/api/modes")
    def modes(readable: Dags, session: SessionDep) -> dict[str, Any]:
        """Every DAG's mode for each pod kind, the deployment's default and the family rules."""
        from airflow_adaptive.plugin.modes import dag_modes

        return dag_modes(get_settings(), session, readable)

    @app.get("/api/nodes")
    def nodes(readable: Dags) -> dict[str, Any]:
        return views.nodes(_store(), get_settings(), readable)


def _family_routes(app: APIRouter) -> None:
    from airflow_adaptive.config import get_settings
    from airflow_adaptive.plugin import views

    # A family's name is arbitrary text ('/', ':', spaces, newlines: Nextflow process names), so it is
    # a query parameter: in the path, "a%2Fwhatif" arrives decoded and reads as the what-if of "a",
    # and Starlette's path pattern (".*" without DOTALL) never matches a newline.
    @app.get("/api/family/whatif")
    def whatif(name: FamilyName, readable: Dags) -> dict[str, Any]:
        found = views.whatif(_store(), get_settings(), readable, name)
        if found is None:
            raise HTTPException(404, f"unknown task family {name!r}")
        return found

    @app.get("/api/family")
    def family(
        name: FamilyName,
        readable: Dags,
        session: SessionDep,
        limit: Annotated[int, Query(ge=1, le=2000)] = 500,
    ) -> dict[str, Any]:
        from airflow_adaptive.plugin.modes import family_modes

        settings = get_settings()
        found = views.family_detail(_store(), settings, readable, name, limit)
        if found is None:
            raise HTTPException(404, f"unknown task family {name!r}")
        return {**found, "modes": family_modes(settings, session, name, found["dags"])}

    @app.get("/api/families/{rest:path}")
    def moved(rest: str) -> None:
        """The old path form was ambiguous; say where a family is now rather than a bare 404."""
        raise HTTPException(404, f"no such endpoint: a family is read at {FAMILY_ROUTES}")


def _queue_routes(app: APIRouter) -> None:
    from airflow_adaptive.config import get_settings

    @app.get("/api/task/{dag_id}/{task_id}")
    def task_family_of(dag_id: str, task_id: str, readable: Dags, session: SessionDep) -> dict[str, Any]:
        """The family a task's page opens (the per-task tab lands here): see plugin/tasks.py."""
        from airflow_adaptive.core.normalise import fit_key
        from airflow_adaptive.plugin.tasks import task_family_for

        dag_id, task_id = fit_key(dag_id), fit_key(task_id)  # as attempts are stored; no NUL reaches SQL
        if readable is not None and dag_id not in readable:
            raise HTTPException(404, f"no task {dag_id}.{task_id} in a DAG you may read")
        return task_family_for(session, _store, dag_id, task_id)

    @app.get("/api/queue")
    def queue(
        readable: Dags, session: SessionDep, limit: Annotated[int, Query(ge=1, le=1000)] = 200
    ) -> dict[str, Any]:
        """Pending and running least-finished-first tasks, in the order the ranks give now."""
        from airflow_adaptive.plugin.queue import queue_view

        return queue_view(session, _store, get_settings(), readable, limit)
