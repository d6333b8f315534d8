"""Table definitions, with their own MetaData and explicit index names."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Date,
    DateTime,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    true,
)

# Airflow's naming convention, so ORM create_all and migrations name things alike.
NAMING_CONVENTION = {
    "ix": "idx_%(column_0_label)s",
    "uq": "%(table_name)s_%(column_0_name)s_uq",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "%(table_name)s_%(column_0_name)s_fkey",
    "pk": "%(table_name)s_pkey",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)

task_attempt = Table(
    "adaptive_task_attempt",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("dag_id", String(250), nullable=False),
    Column("task_id", String(250), nullable=False),
    Column("run_id", String(250), nullable=False),
    Column("map_index", Integer, nullable=False, server_default="-1"),
    Column("try_number", Integer, nullable=False),
    Column("task_family", String(250), nullable=False),
    Column("finished_at", DateTime(timezone=True), nullable=False),
    Column("memory_request_bytes", BigInteger),
    Column("memory_limit_bytes", BigInteger),
    Column("peak_memory_bytes", BigInteger),
    Column("peak_kind", String(16), nullable=False, server_default="none"),
    Column("cpu_core_seconds", Float),
    Column("wall_seconds", Float),
    Column("read_bytes", BigInteger),
    Column("write_bytes", BigInteger),
    Column("input_size_bytes", BigInteger),
    Column("node_name", String(253)),
    Column("exit_reason", String(64), nullable=False),
    Column("exit_code", Integer),
    Column("strategy", String(100)),
    Column("explanation", Text),
    Column("user_request_bytes", BigInteger),
    Column("image", String(500)),  # the container image (warm starts compare families by it)
    Column("program", String(250)),  # what the container's command starts
    Column("memory_profile", JSON),  # seconds to each 2 % of the peak (core/growth.py)
    Column("memory_rebound_bytes", BigInteger),  # its rise after it fell (core/growth_plan.py)
    UniqueConstraint(
        "dag_id", "task_id", "run_id", "map_index", "try_number", name="adaptive_task_attempt_key_uq"
    ),
    Index("idx_adaptive_task_attempt_family_finished", "task_family", "finished_at"),
)

# Attempts whose pods were created and that are not recorded yet: a decision compares how long the
# running ones have run with the family's finished attempts (core/unfinished.py). Recording an attempt removes
# its row; a prune removes rows older than core.unfinished.STALE_AFTER_S.
unfinished_attempt = Table(
    "adaptive_unfinished_attempt",
    metadata,
    Column("dag_id", String(250), primary_key=True),
    Column("task_id", String(250), primary_key=True),
    Column("run_id", String(250), primary_key=True),
    Column("map_index", Integer, primary_key=True, server_default="-1"),
    Column("try_number", Integer, primary_key=True),
    Column("task_family", String(250), nullable=False),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("running", Boolean, nullable=False, server_default=true()),  # false: Pending since started_at
    Index("idx_adaptive_unfinished_attempt_family_started", "task_family", "started_at"),
)

node = Table(
    "adaptive_node",
    metadata,
    Column("node", String(253), primary_key=True),
    Column("benchmarks", JSON, nullable=False),
    Column("cores", Integer),
    Column("memory_bytes", BigInteger),
    Column("capabilities", JSON, nullable=False),
    Column("profiled_at", DateTime(timezone=True), nullable=False),
    Column("group_id", Integer),
    Column("group_ranks", JSON),
    Column("grouped_at", DateTime(timezone=True)),
    Column("benchmark_noise", JSON),  # relative standard error per benchmark, when measured
)


def _count(name: str) -> Column:
    return Column(name, BigInteger, nullable=False, server_default="0")


def _sum(name: str) -> Column:
    return Column(name, Float, nullable=False, server_default="0")


# One row per task family: the rollup (totals over every recorded attempt, kept when attempts are
# pruned) and the fitted sizing model, both updated in the transaction that records an attempt.
family = Table(
    "adaptive_family",
    metadata,
    Column("task_family", String(250), primary_key=True),
    *(_count(c) for c in ("attempts", "completed", "oom_killed", "usable_samples", "lower_bound_samples")),
    _sum("cpu_cores_sum"),
    _count("cpu_cores_n"),
    _sum("peak_memory_sum"),
    _count("peak_memory_n"),
    _sum("io_rate_sum"),
    _count("io_rate_n"),
    _sum("wall_seconds_sum"),
    _count("wall_seconds_n"),
    _sum("requested_byte_seconds"),
    _sum("used_byte_seconds"),
    _sum("user_requested_byte_seconds"),
    _sum("killed_byte_seconds"),
    Column("peaks", JSON),  # core.sketch.LogHistogram of completed attempts' peaks (for P50/P95)
    Column("last_finished_at", DateTime(timezone=True)),
    Column("model", JSON),  # core.learn.FittedModel as a document; NULL: none yet
    Column("model_fitted_at", DateTime(timezone=True)),
    Column("image", String(500)),  # of the newest attempt that named one (warm starts)
    Column("program", String(250)),
)

# One row (id 1): store-wide distributions (completed peaks, families' mean demands and successes).
aggregate = Table(
    "adaptive_aggregate",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("distributions", JSON, nullable=False),
    Column("updated_at", DateTime(timezone=True)),
)

# Totals per family, DAG and day (UTC): which DAGs a family belongs to (for DAG-level access in the
# UI) and the trend over time, kept by the same deltas as the rollups.
family_day = Table(
    "adaptive_family_day",
    metadata,
    Column("task_family", String(250), primary_key=True),
    Column("dag_id", String(250), primary_key=True),
    Column("day", Date, primary_key=True),
    *(_count(c) for c in ("attempts", "completed", "oom_killed", "retries")),
    _sum("requested_byte_seconds"),
    _sum("used_byte_seconds"),
    _sum("user_requested_byte_seconds"),
    _sum("killed_byte_seconds"),
    Index("idx_adaptive_family_day_day", "day"),
)

# Declared inputs: how often each URI was read (across all DAG runs) and its last known size.
shared_input = Table(
    "adaptive_input",
    metadata,
    Column("uri_key", String(64), primary_key=True),  # sha256 of the URI: URIs can be long
    Column("uri", Text, nullable=False),
    Column("size_bytes", BigInteger),
    Column("reads", BigInteger, nullable=False, server_default="0"),
    Column("last_read_at", DateTime(timezone=True), nullable=False),
)

# Which DAGs read each declared input: the UI shows a staged copy only to users who may read one.
input_dag = Table(
    "adaptive_input_dag",
    metadata,
    Column("uri_key", String(64), primary_key=True),
    Column("dag_id", String(250), primary_key=True),
)

# Which node holds which staged input, from the staging reports (soft state: a stale row is a miss).
cached_input = Table(
    "adaptive_cached_input",
    metadata,
    Column("node_name", String(253), primary_key=True),
    Column("content_key", String(64), primary_key=True),
    Column("uri", Text, nullable=False),
    Column("size_bytes", BigInteger, nullable=False),
    Column("last_used_at", DateTime(timezone=True), nullable=False),
    Index("idx_adaptive_cached_input_content_key", "content_key"),
)
