"""A discrete-event simulator (SimPy) of a heterogeneous Kubernetes cluster running Airflow-style DAGs.

``params`` names every modelling choice with its default and source, ``cluster``
and ``workload`` describe what runs where, ``engine`` runs one policy, and
``compare`` runs several side by side on the same seeded inputs.
"""
