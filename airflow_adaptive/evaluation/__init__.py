"""Evaluation: replaying traces through sizing strategies (the replay, its report across trace
files, synthetic task sets from the papers). Measures the policy; nothing here decides a pod."""
