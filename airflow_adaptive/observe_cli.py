"""``airflow-adaptive observe``: the observer component (see observer/__init__.py)."""

from __future__ import annotations

import argparse
import os
import signal
import socket
from typing import Any, TextIO

from airflow_adaptive.cli_args import seconds
from airflow_adaptive.exceptions import ClusterUnavailableError
from airflow_adaptive.failopen import first_line


def cmd_observe(args: argparse.Namespace, out: TextIO) -> int:
    from airflow_adaptive.advisor import Advisor
    from airflow_adaptive.config import get_settings
    from airflow_adaptive.observer.lease import LeaderLease
    from airflow_adaptive.observer.loop import Observer

    settings = get_settings()
    api_client = _api_client()
    identity = f"{socket.gethostname()}-{os.getpid()}"
    namespace = args.namespace or _default_namespace()  # read here: Airflow is slow to import
    lease = LeaderLease(api_client, namespace, identity)
    observer = Observer(api_client, lease, lambda: Advisor(settings))
    if args.once:
        print(f"recorded {observer.cycle()} ended pods", file=out)
        return 0
    signal.signal(signal.SIGTERM, lambda *_: observer.stop.set())
    print(f"observing worker pods in namespace {namespace!r} as {identity}", file=out, flush=True)
    observer.run(args.interval)
    return 0


def _api_client() -> Any:
    """The KubernetesExecutor's client configuration (in-cluster in the Deployment)."""
    try:
        from airflow.providers.cncf.kubernetes.kube_client import get_kube_client

        return get_kube_client().api_client
    except Exception as err:  # no kube config: a clear line, not a traceback
        raise ClusterUnavailableError(
            "no Kubernetes API to observe: not in a cluster, and [kubernetes_executor] in_cluster / "
            f"config_file name no kubeconfig that works ({type(err).__name__}: {first_line(err)})"
        ) from None


def add_observe_command(sub: Any) -> None:
    observe = sub.add_parser(
        "observe", help="record ended KubernetesExecutor worker pods (run as a Deployment, see deploy/)"
    )
    observe.add_argument(
        "--namespace",
        help="namespace of the worker pods (default: the executor's, [kubernetes_executor] namespace)",
    )
    observe.add_argument("--interval", type=seconds, default=5.0, help="seconds between cycles (default 5)")
    observe.add_argument("--once", action="store_true", help="one cycle, then exit")
    observe.set_defaults(func=cmd_observe)


def _default_namespace() -> str:
    from airflow.configuration import conf

    return str(conf.get("kubernetes_executor", "namespace", fallback="default"))
