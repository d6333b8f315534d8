"""The ``[adaptive]`` config section as declared: names, types, defaults, descriptions.

Airflow reads it through the provider info while it imports itself (every scheduler, worker and
API server process), so it imports nothing heavy: reading the values is ``config.py``'s.
"""

from __future__ import annotations

from typing import Any

from airflow_adaptive.core.defaults import MAX_OOM_RATE, MIN_MEMORY_MIB
from airflow_adaptive.core.placement import DEFAULT_PLACEMENT

SECTION = "adaptive"

# name -> (type, default, description). The provider info and the docs are generated from this.
OPTIONS: dict[str, tuple[str, str, str]] = {
    "history_conn_id": (
        "string",
        "adaptive_history_default",
        "Airflow connection whose SQLAlchemy URL (extra ``sqlalchemy_url``, or host/login/schema) reaches "
        "the history store from task processes, where Airflow blocks its own ORM.",
    ),
    "store_timeout_seconds": (
        "float",
        "5.0",
        "Connect and statement timeout for the history store. Past it the pod keeps the user's resources.",
    ),
    "strategy": ("string", "adaptive", "Registered name of the memory sizing strategy."),
    "min_observations": (
        "integer",
        "1",
        "Completed attempts of a task family needed before its memory is sized from history. Above 1, "
        "a family with fewer keeps the user's request, with no cold or warm start: fewer OOM kills for "
        "more memory (README, Memory sizing).",
    ),
    "history_window": ("integer", "500", "Most recent attempts of a task family that a decision reads."),
    "retention_attempts": (
        "integer",
        "5000",
        "``airflow-adaptive history prune`` keeps this many newest attempts per task family (0: no limit). "
        "Rollups keep their totals.",
    ),
    "retention_days": (
        "float",
        "0",
        "``airflow-adaptive history prune`` removes attempts older than this many days (0: no limit).",
    ),
    "max_oom_rate": (
        "float",
        str(MAX_OOM_RATE),
        "OOM-kill budget of the ``adaptive`` strategy, in kills per task (0.02: at most 2 %). Its rules "
        "aim at half of it, the target, so that a run's rate stays within it: per task family the cheapest "
        "rule whose replayed kill rate stays within the target, and until a family has 1 / target finished "
        "tasks, at least the lesser of their log-normal and gap prediction bounds on the next peak (at the "
        "level that lets the target through on "
        "the store's families), at most the request (1.0: no "
        "budget). Lower: fewer kills for more memory (README, Memory sizing).",
    ),
    "warm_starts": (
        "boolean",
        "True",
        "Size a task family with no history of its own by the model of the family with the same task "
        "name (the last part of its name: ``fastqc`` in ``rnaseq.fastqc``), or the same image and "
        "program (not ``python -c`` nor Airflow's own task runner, which name no tool), at most the "
        "user's request, until it has history.",
    ),
    "size_cpu": (
        "boolean",
        "False",
        "Set each pod's CPU request to ``cpu_quantile`` of the cores its family's completed attempts kept "
        "busy (at least ``min_cpu``, at most the largest profiled node's cores and the pod's own CPU "
        "limit); CPU limits stay as set.",
    ),
    "cpu_quantile": ("float", "0.9", "Quantile of recorded cores busy that ``size_cpu`` requests."),
    "min_cpu": ("string", "100m", "Smallest CPU request ``size_cpu`` sets (a Kubernetes CPU quantity)."),
    "oom_retry_policy": (
        "string",
        "strategy",
        "Memory for the try after an OOM kill: ``strategy`` (the sizing strategy's own retry: ``adaptive`` "
        "takes the cheapest of doubling, the VPA bump, its largest peak + 15 % and quantiles of its peaks "
        "above the killed limit, replayed on those peaks; doubling for the others), ``double`` or "
        "``vpa-bump`` (max(+100 MiB, x1.2)).",
    ),
    "max_allocatable_memory": (
        "string",
        "64Gi",
        "Largest memory any node can allocate (Kubernetes quantity). No decision goes above it, a user's "
        "request included once history sizes the family; a pod that keeps its request (no history yet, "
        "or the decision failed open) keeps it as asked, and a retry never lowers it.",
    ),
    "min_memory": (
        "string",
        f"{MIN_MEMORY_MIB}Mi",
        "Smallest memory request a decision gives (Kubernetes quantity).",
    ),
    "limit_to_request_ratio": (
        "float",
        "1.0",
        "Memory limit as a multiple of the decided request (1.0: limit = request, no overcommit).",
    ),
    "mode": (
        "string",
        "off",
        "How far the provider goes with pods it did not build (plain KubernetesPodOperator tasks, "
        "KubernetesExecutor workers): ``off`` (left alone), ``observe`` (the command wrapped and the attempt "
        "recorded; the pod keeps the user's resources, its annotation says what would have been decided), "
        "``recommend`` (as observe, and the recommendation shown in the UI and by ``decide``) or ``enforce`` "
        "(sized and placed). A DAG tag ``adaptive:<mode>`` and ``family_modes`` override it.",
    ),
    "family_modes": (
        "string",
        "",
        "Modes per task family, the most specific setting: ``pattern=mode`` items, comma-separated, with "
        "shell-style patterns (``etl.*=enforce, genomics.align=observe``); the first match wins. A DAG's "
        "tasks are families ``<dag_id>.<task_id>`` unless a task sets ``task_family``. It also "
        "overrides the operator's pods (``*=observe`` rolls every pod back to the user's resources).",
    ),
    "mutate_all_pods": (
        "boolean",
        "False",
        "Deprecated: ``True`` is read as ``mode = enforce`` while ``mode`` is ``off``.",
    ),
    "placement_policy": (
        "string",
        DEFAULT_PLACEMENT,
        "How pods prefer node groups: ``finish-time`` (the group where the family is expected to finish "
        "first: its runtime there, learnt from its recorded runs and the groups' benchmarks, stretched "
        "by the CPU sharing it would meet there when live load is on; tarema's labels for a family with "
        "no run on a profiled node yet), ``tarema`` (task labels matched to group ranks) or a baseline "
        "(``sjfn``, ``fair``, ``fill-nodes``, ``round-robin``). Always preferred affinity, never required.",
    ),
    "placement_live_load": (
        "boolean",
        "False",
        "Before placing a pod, the operator reads which node groups have an idle node, so that they may "
        "take tasks labelled for weaker groups, and each node's cores, cores requested and cores its pods "
        "are expected to keep busy, from which ``finish-time`` weighs the CPU sharing a pod would meet "
        "(two list calls of every node and unfinished pod, shared by a machine's pods for "
        "``placement_live_load_ttl_seconds``).",
    ),
    "placement_live_load_ttl_seconds": (
        "float",
        "10.0",
        "How long the pods of one machine share a view of the node groups' load (its staleness at most); "
        "0: every pod lists the cluster itself.",
    ),
    "lff_failures": (
        "string",
        "persevere",
        "Least-finished-first's second key, failed attempts of the family: ``persevere`` (more failures "
        "first; Witt et al. found it better when tasks fail late) or ``postpone`` (fewer first).",
    ),
    "priority_classes": (
        "boolean",
        "True",
        "Give pods without a priority class one of the ``adaptive-lff-*`` PriorityClasses by their "
        "family's least-finished-first rank, when that class exists in the cluster (checked, cached).",
    ),
    "cache_root": (
        "string",
        "",
        "Node-local directory (hostPath) where shared inputs read by several tasks are staged; empty "
        "turns staging off. Mount a tmpfs there on the nodes to stage into RAM.",
    ),
    "cache_budget": ("string", "50Gi", "Bytes the staged inputs may take on one node (quantity)."),
    "staging_image": (
        "string",
        "python:3.12-slim",
        "Image of the staging init container (needs python3; with fsspec and its s3fs/gcsfs it reaches "
        "object stores, without it file paths and http(s) URLs).",
    ),
    "shared_read_bytes_per_second": (
        "float",
        "100e6",
        "What one task reads from shared storage per second: the locality weight's saving is staged bytes "
        "over this rate.",
    ),
    "small_input_below": ("string", "1M", "Inputs below this size stay on shared storage (quantity)."),
    "big_input_from": ("string", "1G", "Inputs from this size are big, below it medium (quantity)."),
    "metrics_sample_interval_seconds": (
        "float",
        "10.0",
        "How often the metrics API is sampled for containers whose command cannot be wrapped.",
    ),
    "grow_in_place": (
        "boolean",
        "False",
        "Let the node agent (``airflow-adaptive grow-agent``, deploy/grow-agent.yaml) grow the memory of "
        "running enforced pods in place (Kubernetes 1.33+ ``pods/resize``) before they are OOM-killed: such "
        "pods get a memory resize policy that needs no restart and the label the agent selects by.",
    ),
    "grow_resize_latency_seconds": (
        "float",
        "5.0",
        "With ``grow_in_place``: the seconds a resize takes on this cluster from the agent's PATCH until the "
        "new limit is in the cgroup. The family's start and headroom are learnt for it, and the agent "
        "defaults to it (``replay --time-series --resize-latency`` shows what it costs).",
    ),
    "spool_dir": (
        "string",
        "",
        "Folder for attempts that could not be recorded; they are written on the next successful access. "
        "Empty: ``$AIRFLOW_HOME/adaptive-spool``.",
    ),
}


def provider_config() -> dict[str, Any]:
    """The ``config`` entry of the provider info."""
    return {
        SECTION: {
            "description": "Adaptive memory sizing and task history for Kubernetes pods.",
            "options": {
                name: {
                    "description": description,
                    "version_added": "0.1.0",
                    "type": kind,
                    "example": None,
                    "default": default,
                }
                for name, (kind, default, description) in OPTIONS.items()
            },
        }
    }
