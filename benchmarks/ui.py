"""UI endpoint latency at 1M attempts (10k families) on PostgreSQL, through Airflow's real app.

    python benchmarks/ui.py [--attempts 1000000] [--calls 40]

Fills the ``adaptive_bench`` database as ``benchmarks/store.py`` does (bulk SQL, 100 attempts per
family, attempts a second apart from 2026-01-01, spread over 100 DAGs), then calls every JSON endpoint of
the plugin in-process with a logged-in viewer's token and prints p50 / p95 per endpoint. The first
what-if of a family replays every strategy (timed separately); later ones are cached.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

URL = "postgresql+psycopg2://postgres@127.0.0.1:5432/adaptive_bench"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--attempts", type=int, default=1_000_000)
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()
    os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = URL  # before Airflow is imported
    from airflow import settings
    from airflow.api_fastapi.app import create_app, get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from fastapi.testclient import TestClient

    sys.path.insert(0, str(Path(__file__).parent))
    from store import fill, make_engine

    engine = make_engine("postgres", URL.rsplit("/", 1)[0] + "/", None)  # type: ignore[arg-type]
    # Airflow's own tables too: the api-server checks tokens against them.
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True, capture_output=True)
    started = time.perf_counter()
    fill(engine, args.attempts)
    print(f"{args.attempts:,} attempts built in {time.perf_counter() - started:.1f} s")
    assert settings.engine is not None and str(settings.engine.url).endswith("adaptive_bench")
    client = TestClient(create_app("core"))
    token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="viewer", role="VIEWER"))
    headers = {"Authorization": f"Bearer {token}"}
    families = [f"f{i * 97}" for i in range(args.calls)]
    paths = {
        "overview (all time)": lambda i: "/adaptive/api/overview",
        "overview (one week)": lambda i: "/adaptive/api/overview?start=2026-01-01&end=2026-01-07",
        "families, page 1 by attempts": lambda i: "/adaptive/api/families",
        "families, search, by OOM": lambda i: f"/adaptive/api/families?search=f{i}&sort=oom_killed",
        "families, page 100": lambda i: "/adaptive/api/families?page=100",
        "family detail (100 attempts)": lambda i: f"/adaptive/api/family?name={families[i]}",
        "nodes": lambda i: "/adaptive/api/nodes",
    }
    print(f"{'endpoint':34s} {'p50 ms':>8s} {'p95 ms':>8s}")
    for name, path in paths.items():
        report(name, [timed(client, path(i), headers) for i in range(args.calls)])
    whatif = "/adaptive/api/family/whatif?name=f1"  # f1: 100 completed attempts (multiples of 50 are all OOM)
    report("what-if, first (replays 100 tasks)", [timed(client, whatif, headers)])
    report("what-if, cached", [timed(client, whatif, headers) for _ in range(args.calls)])


def timed(client: object, path: str, headers: dict[str, str]) -> float:
    start = time.perf_counter()
    response = client.get(path, headers=headers)  # type: ignore[attr-defined]
    millis = (time.perf_counter() - start) * 1000.0
    assert response.status_code == 200, (path, response.status_code, response.text[:300])
    return millis


def report(name: str, millis: list[float]) -> None:
    print(f"{name:34s} {statistics.median(millis):8.1f} {np.percentile(millis, 95):8.1f}")


if __name__ == "__main__":
    main()
