"""``airflow-adaptive observe``: the observer component (see observer/__init__.py)."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
from typing import Any, TextIO

from airflow_adaptive.cli_args import namespace_name, seconds
from airflow_adaptive.exceptions import ClusterUnavailableError
from airflow_adaptive.failopen import failure_reason, one_round, quiet_retries


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
        print(f"recorded {one_round('observe: the cycle', observer.cycle)} ended pods", file=out)
        return 0
    signal.signal(signal.SIGTERM, lambda *_: observer.stop.set())
    print(f"observing worker pods in namespace {namespace!r} as {identity}", file=out, flush=True)
    observer.run(args.interval)
    return 0


def _api_client() -> Any:
    """The KubernetesExecutor's client configuration (in-cluster in the Deployment); outside a
    cluster, else, the kubeconfig of $KUBECONFIG or ~/.kube/config, as kubectl would use."""
    quiet_retries()  # a call that still fails is said once by the command's loop
    try:
        from airflow.providers.cncf.kubernetes.kube_client import get_kube_client

        return get_kube_client().api_client
    except Exception as err:  # no kube config: a clear line, not a traceback
        why = failure_reason(err)
    from airflow.configuration import conf

    if conf.get("kubernetes_executor", "config_file", fallback=None):  # named: no other cluster quietly
        raise ClusterUnavailableError(
            f"no Kubernetes API: [kubernetes_executor] config_file unusable ({why})"
        )
    return _kubeconfig_client(why)


def _kubeconfig_client(why: str) -> Any:
    """Where Airflow's own settings name no kubeconfig and this is no cluster: $KUBECONFIG or
    ~/.kube/config, as kubectl reads them, said on standard error."""
    from kubernetes import config

    from airflow_adaptive.kubernetes.kubeconfig import names_a_file, unusable

    named = os.environ.get("KUBECONFIG") or "~/.kube/config"  # now: the client read it at import
    if not names_a_file(named):
        raise ClusterUnavailableError(
            f"no Kubernetes API: not in a cluster ({why}), and no kubeconfig at $KUBECONFIG or ~/.kube/config"
        )
    try:
        client = config.new_client_from_config(config_file=named)
    except Exception as err:
        raise ClusterUnavailableError(
            f"no Kubernetes API: kubeconfig {named} unusable ({unusable(err)})"
        ) from None
    print(f"not in a cluster: using kubeconfig {named}", file=sys.stderr)
    return client


def add_observe_command(sub: Any) -> None:
    observe = sub.add_parser(
        "observe", help="record ended KubernetesExecutor worker pods (run as a Deployment, see deploy/)"
    )
    observe.add_argument(
        "--namespace",
        type=namespace_name,
        help="namespace of the worker pods (default: the executor's, [kubernetes_executor] namespace)",
    )
    observe.add_argument("--interval", type=seconds, default=5.0, help="seconds between cycles (default 5)")
    observe.add_argument("--once", action="store_true", help="one cycle, then exit")
    observe.set_defaults(func=cmd_observe)


def _default_namespace() -> str:
    from airflow.configuration import conf

    return str(conf.get("kubernetes_executor", "namespace", fallback="default"))
