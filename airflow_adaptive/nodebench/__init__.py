"""Node profiles: reading and writing the JSON shape the profiler produces."""
