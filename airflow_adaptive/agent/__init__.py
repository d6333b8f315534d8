"""The node-local side of in-place memory growth: reading and setting container cgroups."""
