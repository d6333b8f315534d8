"""Fixtures of the UI tests: the real api-server with demo history, headless Chromium, and the
api-server app in-process with a viewer's token."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_adaptive.core.grouping import NodeProfile, group_nodes
from airflow_adaptive.core.locality import InputUse, content_key
from airflow_adaptive.core.units import GIB
from airflow_adaptive.demo import generated_history
from tests.conftest import sql_store
from tests.edges.browser_kit import CHROMIUM, DRIVER, free_port


@pytest.fixture
def api_server(tmp_path: Path, engine: Any) -> Iterator[str]:
    """The real api-server on the test database, with demo history, nodes, and one user."""
    store = sql_store(engine)
    store.record(generated_history())
    profiles = [
        NodeProfile(
            f"node-{g}{i}", {"cpu_events_per_s": cpu + i, "memory_mib_per_s": mem + 9 * i}, 8, 32 * GIB
        )
        for g, (cpu, mem) in enumerate([(370, 13800), (460, 17500), (524, 19850)])
        for i in range(2)
    ]
    store.save_nodes(profiles, group_nodes(profiles))
    genome = InputUse(
        "s3://refs/GRCh38/genome.fa",
        3_100_000_000,
        content_key("s3://refs/GRCh38/genome.fa", 3_100_000_000),
        True,
    )
    index = InputUse(
        "s3://refs/GRCh38/bwa.idx",
        5_400_000_000,
        content_key("s3://refs/GRCh38/bwa.idx", 5_400_000_000),
        True,
    )
    store.record_inputs("node-00", [genome, index], [])
    store.record_inputs("node-11", [genome], [])
    port = free_port()
    passwords = tmp_path / "passwords.json"
    passwords.write_text(json.dumps({"admin": "s3cret-admin"}))
    env = dict(os.environ, AIRFLOW__API__HOST="127.0.0.1", AIRFLOW__API__PORT=str(port),
               AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="admin:admin",
               AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE=str(passwords))  # fmt: skip
    log = (tmp_path / "api-server.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "airflow", "api-server", "--port", str(port)],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/api/v2/version", timeout=1)
                break
            except OSError:
                assert server.poll() is None, (tmp_path / "api-server.log").read_text()[-3000:]
                time.sleep(0.5)
        yield base
    finally:
        os.killpg(server.pid, 15)
        server.wait(30)


@pytest.fixture
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1366,900"):
        options.add_argument(arg)
    options.binary_location = CHROMIUM or "chromium"
    driver = webdriver.Chrome(service=Service(DRIVER or "chromedriver"), options=options)
    driver.implicitly_wait(0)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def client() -> Any:
    from airflow.api_fastapi.app import create_app
    from fastapi.testclient import TestClient

    return TestClient(create_app("core"))


@pytest.fixture
def auth() -> dict[str, str]:
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="viewer", role="VIEWER"))
    return {"Authorization": f"Bearer {token}"}
