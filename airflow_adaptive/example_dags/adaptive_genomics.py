"""A small variant-calling workflow: fan-out alignment over samples, fan-in merge.

Every alignment reads the same reference genome (a shared, read-only volume)
and shares one task family, so all samples learn from each other's history.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG
from kubernetes.client import models as k8s

from airflow_adaptive.operators.pod import AdaptiveKubernetesPodOperator

SAMPLES = ("NA12878", "NA12891", "NA12892", "HG002")
REFERENCE = k8s.V1Volume(
    name="reference",
    persistent_volume_claim=k8s.V1PersistentVolumeClaimVolumeSource(
        claim_name="reference-grch38", read_only=True
    ),
)
REFERENCE_MOUNT = k8s.V1VolumeMount(name="reference", mount_path="/ref", read_only=True)


def resources(memory: str, cpu: str = "1") -> k8s.V1ResourceRequirements:
    """What a careful user would write today: a generous guess, limit = request."""
    return k8s.V1ResourceRequirements(requests={"memory": memory, "cpu": cpu}, limits={"memory": memory})


with DAG(
    dag_id="adaptive_genomics",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=30), "namespace": "airflow"},
    tags=["adaptive", "example"],
) as dag:
    index = AdaptiveKubernetesPodOperator(
        task_id="index_reference",
        task_family="genomics.index_reference",
        image="biocontainers/bwa:v0.7.17_cv1",
        cmds=["sh", "-c"],
        arguments=["test -f /ref/GRCh38.fa.bwt || bwa index /ref/GRCh38.fa"],
        container_resources=resources("8Gi", "2"),
        volumes=[REFERENCE],
        volume_mounts=[REFERENCE_MOUNT],
    )
    merge = AdaptiveKubernetesPodOperator(
        task_id="merge_variants",
        task_family="genomics.merge_variants",
        image="biocontainers/bcftools:v1.9-1-deb_cv1",
        cmds=["sh", "-c"],
        arguments=["bcftools merge -o /data/cohort.vcf.gz /data/*.vcf.gz"],
        container_resources=resources("4Gi"),
    )
    report = AdaptiveKubernetesPodOperator(
        task_id="report",
        task_family="genomics.report",
        image="python:3.12-slim",
        cmds=["python", "-c"],
        arguments=["print('cohort report written')"],
        container_resources=resources("2Gi", "500m"),
    )
    for sample in SAMPLES:
        align = AdaptiveKubernetesPodOperator(
            task_id=f"align_{sample}",
            task_family="genomics.align",
            image="biocontainers/bwa:v0.7.17_cv1",
            cmds=["sh", "-c"],
            arguments=[f"bwa mem -t 4 /ref/GRCh38.fa /data/{sample}.fq.gz > /data/{sample}.sam"],
            container_resources=resources("16Gi", "4"),
            volumes=[REFERENCE],
            volume_mounts=[REFERENCE_MOUNT],
        )
        call = AdaptiveKubernetesPodOperator(
            task_id=f"call_{sample}",
            task_family="genomics.call_variants",
            image="biocontainers/bcftools:v1.9-1-deb_cv1",
            cmds=["sh", "-c"],
            arguments=[f"bcftools mpileup -f /ref/GRCh38.fa /data/{sample}.bam | bcftools call -mv"],
            container_resources=resources("8Gi", "2"),
            volumes=[REFERENCE],
            volume_mounts=[REFERENCE_MOUNT],
        )
        index >> align >> call >> merge
    merge >> report
