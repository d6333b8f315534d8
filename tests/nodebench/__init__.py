"""The node microbenchmarks."""
