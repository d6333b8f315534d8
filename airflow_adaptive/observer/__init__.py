"""The observer: records the ended pods nobody else reads back (KubernetesExecutor workers).

A task process the kernel OOM-kills records nothing itself, and the executor deletes finished
worker pods, so one component reads every worker pod's end: ``airflow-adaptive observe``, a
Deployment (deploy/observer.yaml). Replicas elect a leader through a Lease; while the leader renews
it, the pod-mutation hook gives worker pods a finalizer, so a pod deleted at completion waits until
it is recorded. When the observer is absent its Lease expires, and no pod waits for it.
"""
