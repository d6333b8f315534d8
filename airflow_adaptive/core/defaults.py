"""The provider's defaults that more than one layer reads: one home, so settings, the decision, the
strategies and the replay cannot drift apart. (Units live in ``units.py``.)"""

MAX_OOM_RATE = 0.02  # the default OOM-kill budget of strategies that take one, kills per task
MIN_MEMORY_MIB = 64  # the default ``min_memory``: the least memory any decision (or replay of one) gives
