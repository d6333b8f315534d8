"""The admission policy shipped beside the grow agent, evaluated by a CEL engine (cel-python) on the
admission requests the agent sends and on the writes its cluster-wide "patch pods" would otherwise
allow. No API server runs here: the expressions' logic is what is checked, not the API server's own
type checking of them."""

from __future__ import annotations

import copy
from typing import Any

import celpy
import pytest
from celpy import celtypes
from kubernetes.client import ApiClient
from kubernetes.client import models as k8s

from airflow_adaptive.kubernetes.names import GROWN_ANNOTATION
from airflow_adaptive.kubernetes.resize import allow_growth
from tests.conftest import shipped_manifest

AGENT = "system:serviceaccount:airflow:airflow-adaptive-grow-agent"
NODE_CLAIM = "authentication.kubernetes.io/node-name"


class Policy:
    """A ValidatingAdmissionPolicy's match conditions, variables (in order) and validations."""

    def __init__(self, spec: dict[str, Any]) -> None:
        env = celpy.Environment()
        compiled = lambda text: env.program(env.compile(text))  # noqa: E731
        self.conditions = [compiled(c["expression"]) for c in spec["matchConditions"]]
        self.variables = [(v["name"], compiled(v["expression"])) for v in spec["variables"]]
        self.validations = [(compiled(v["expression"]), v["message"]) for v in spec["validations"]]

    def refusals(self, request: dict[str, Any], new: dict[str, Any], old: dict[str, Any]) -> list[str] | None:
        """None when the policy does not apply; else the messages of the validations that fail (an
        expression that errs fails too: the policy's failurePolicy is Fail)."""
        activation: dict[str, Any] = {
            "request": celpy.json_to_cel(request),
            "object": celpy.json_to_cel(new),
            "oldObject": celpy.json_to_cel(old),
        }
        if not all(bool(c.evaluate(activation)) for c in self.conditions):
            return None
        variables = celtypes.MapType({})
        for name, program in self.variables:
            activation["variables"] = variables
            variables = celtypes.MapType(
                {**variables, celtypes.StringType(name): program.evaluate(activation)}
            )
        activation["variables"] = variables
        return [message for program, message in self.validations if _fails(program, activation)]


def _fails(program: Any, activation: dict[str, Any]) -> bool:
    try:
        said = program.evaluate(activation)
    except celpy.CELEvalError:
        return True
    return not (isinstance(said, celtypes.BoolType) and bool(said))  # an error value fails too


@pytest.fixture(scope="module")
def policy() -> Policy:
    docs = shipped_manifest("grow-agent.yaml")
    spec = next(d for d in docs if d["kind"] == "ValidatingAdmissionPolicy")["spec"]
    binding = next(d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding")["spec"]
    assert spec["failurePolicy"] == "Fail" and binding["validationActions"] == ["Deny"]
    account = next(d for d in docs if d["kind"] == "ServiceAccount")["metadata"]
    assert (
        f"system:serviceaccount:{account['namespace']}:{account['name']}" == AGENT
    )  # the account the policy confines
    rules = spec["matchConstraints"]["resourceRules"]
    assert [(r["resources"], r["operations"]) for r in rules] == [(["pods", "pods/resize"], ["UPDATE"])]
    return Policy(spec)


def _pod(node: str = "node-a", grown: bool = True) -> dict[str, Any]:
    """A running task pod as the provider builds it, labelled for growth (``grown``) by its own code."""
    container = k8s.V1Container(
        name="base",
        image="busybox",
        resources=k8s.V1ResourceRequirements(
            requests={"cpu": "1", "memory": "1Gi"}, limits={"memory": "1Gi"}
        ),
    )
    sidecar = k8s.V1Container(
        name="proxy",
        image="envoy",
        resources=k8s.V1ResourceRequirements(requests={"cpu": "100m", "memory": "64Mi"}),
    )
    pod = k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name="task-1", namespace="airflow", annotations={"note": "kept"}),
        spec=k8s.V1PodSpec(containers=[container, sidecar], node_name=node),
    )
    if grown:
        allow_growth(pod, "base", None)
    return dict(ApiClient().sanitize_for_serialization(pod))


def _request(sub_resource: str = "", user: str = AGENT, node: str | None = "node-a") -> dict[str, Any]:
    extra = {NODE_CLAIM: [node]} if node is not None else {}
    return {"subResource": sub_resource, "userInfo": {"username": user, "extra": extra}}


def _resized(pod: dict[str, Any], memory: str = "2Gi", container: int = 0) -> dict[str, Any]:
    """What the agent's PATCH of pods/resize makes of the pod: one container's memory changed."""
    new = copy.deepcopy(pod)
    resources = new["spec"]["containers"][container]["resources"]
    for kind in ("requests", "limits"):
        resources.setdefault(kind, {})["memory"] = memory
    return new


def _annotated(pod: dict[str, Any], key: str, value: str) -> dict[str, Any]:
    new = copy.deepcopy(pod)
    new["metadata"]["annotations"][key] = value
    return new


def test_the_agents_own_writes_pass(policy: Policy) -> None:
    pod = _pod()
    assert policy.refusals(_request("resize"), _resized(pod), pod) == []
    assert policy.refusals(_request(), _annotated(pod, GROWN_ANNOTATION, "grew 1 GiB -> 2 GiB"), pod) == []


def test_other_users_are_not_this_policys_business(policy: Policy) -> None:
    pod = _pod(grown=False)
    changed = copy.deepcopy(pod)
    changed["spec"]["containers"][0]["image"] = "evil"
    for user in ("system:serviceaccount:airflow:worker", "airflow-adaptive-grow-agent", "alice"):
        assert policy.refusals(_request(user=user), changed, pod) is None


def test_the_agent_deployed_in_another_namespace_is_confined_too(policy: Policy) -> None:
    """An operator who moves the agent's namespace need not edit the policy to keep it in force."""
    pod = _pod()
    request = _request(user="system:serviceaccount:data-team:airflow-adaptive-grow-agent")
    assert policy.refusals(dict(request, subResource="resize"), _resized(pod), pod) == []
    changed = copy.deepcopy(pod)
    changed["spec"]["containers"][0]["image"] = "evil"
    assert policy.refusals(request, changed, pod)


ON_ITS_NODE = "only pods on the node it runs on"
LABELLED = "only pods labelled adaptive.airflow.io/grow=true"
ANNOTATION_ONLY = "only a pod's adaptive.airflow.io/grown annotation"
MEMORY_ONLY = "only the memory of the container adaptive.airflow.io/grow-container names"


@pytest.mark.parametrize(
    ("case", "refused"),
    [
        ("a pod on another node", ON_ITS_NODE),
        ("a token naming no node", ON_ITS_NODE),
        ("a token without extra claims", ON_ITS_NODE),
        ("a pod not labelled for growth", LABELLED),
        ("labelling a pod for growth itself", LABELLED),
        ("a new image", ANNOTATION_ONLY),
        ("another annotation", ANNOTATION_ONLY),
        ("an added annotation", ANNOTATION_ONLY),
        ("a removed annotation", ANNOTATION_ONLY),
        ("a finalizer", ANNOTATION_ONLY),
        ("an owner", ANNOTATION_ONLY),
        ("a sidecar's memory", MEMORY_ONLY),
        ("the task's CPU", MEMORY_ONLY),
        ("a resize policy that restarts", MEMORY_ONLY),
        ("an init container's memory", MEMORY_ONLY),
    ],
)
def test_what_its_cluster_wide_patch_would_allow_is_refused(policy: Policy, case: str, refused: str) -> None:
    pod, request = _pod(), _request()
    new = _annotated(pod, GROWN_ANNOTATION, "grew")
    if case == "a pod on another node":
        pod, new, request = _pod(node="node-b"), _resized(_pod(node="node-b")), _request("resize")
    elif case == "a token naming no node":
        request = _request("resize", node=None)
        new = _resized(pod)
    elif case == "a pod not labelled for growth":
        pod = _pod(grown=False)
        new, request = _resized(pod), _request("resize")
    elif case == "labelling a pod for growth itself":
        pod = _pod(grown=False)
        new = _pod()
    elif case == "a new image":
        new["spec"]["containers"][0]["image"] = "evil"
    elif case == "another annotation":
        new = _annotated(pod, "note", "changed")
    elif case == "an added annotation":
        new = _annotated(pod, "example.com/run-as", "root")
    elif case == "a removed annotation":
        del new["metadata"]["annotations"]["note"]
    elif case == "a finalizer":
        new["metadata"]["finalizers"] = ["example.com/hold"]
    elif case == "a token without extra claims":
        request, new = _request("resize"), _resized(pod)
        del request["userInfo"]["extra"]
    elif case == "a sidecar's memory":
        request, new = _request("resize"), _resized(pod, container=1)
    elif case == "the task's CPU":
        request, new = _request("resize"), _resized(pod)
        new["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "4"
    elif case == "a resize policy that restarts":
        request, new = _request("resize"), _resized(pod)
        new["spec"]["containers"][0]["resizePolicy"] = [
            {"resourceName": "memory", "restartPolicy": "RestartContainer"}
        ]
    elif case == "an init container's memory":
        pod["spec"]["initContainers"] = [{"name": "fetch", "image": "busybox", "restartPolicy": "Always"}]
        request, new = _request("resize"), _resized(pod)
        new["spec"]["initContainers"][0]["resources"] = {"limits": {"memory": "8Gi"}}
    elif case == "an owner":
        new["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u"}]
    said = policy.refusals(request, new, pod)
    assert said and any(refused in message for message in said), said
