"""Our label, annotation and finalizer names on pods. No imports: the task policy reads them while
Airflow parses every DAG file."""

PREFIX = "adaptive.airflow.io"
FAMILY_LABEL = f"{PREFIX}/task-family"
STRATEGY_LABEL = f"{PREFIX}/strategy"
OPT_OUT_LABEL = f"{PREFIX}/opt-out"
MANAGED_LABEL = f"{PREFIX}/managed-by"
DECISION_ANNOTATION = f"{PREFIX}/decision"
PLACEMENT_ANNOTATION = f"{PREFIX}/placement"
PRIORITY_ANNOTATION = f"{PREFIX}/priority"
GROUP_LABEL = f"{PREFIX}/group"
MODE_LABEL = f"{PREFIX}/mode"  # how far the provider went with the pod (core/modes.py)
MODE_ANNOTATION = f"{PREFIX}/mode"  # the mode and what set it
DAG_MODE_ANNOTATION = f"{PREFIX}/dag-mode"  # the DAG's tag's mode, stamped on its tasks by the task policy
USER_MEMORY_ANNOTATION = f"{PREFIX}/user-memory"  # the user's memory resources, as asked (JSON)
RECORD_FINALIZER = f"{PREFIX}/record"  # kept until the observer has recorded the ended pod
CAPABILITY_PREFIX = "capability.adaptive.airflow.io/"
STRATEGY_ANNOTATION = f"{PREFIX}/strategy"
FAMILY_ANNOTATION = f"{PREFIX}/task-family"
BUSY_CORES_ANNOTATION = f"{PREFIX}/cores-busy"  # its family's recorded mean cores busy (live load reads it)
GROW_LABEL = f"{PREFIX}/grow"  # the node agent may grow this pod's memory in place
HEADROOM_ANNOTATION = f"{PREFIX}/grow-headroom"  # the family's headroom by level (JSON)
GROW_CONTAINER_ANNOTATION = f"{PREFIX}/grow-container"  # the task's container: the only one the agent resizes
GROWN_ANNOTATION = f"{PREFIX}/grown"  # what the agent grew (or could not), explained
