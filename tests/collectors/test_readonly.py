"""The collectors are read-only by construction: no mutating Kubernetes call, no non-GET HTTP call.

The scan reads ``collectors/sources/`` (AST): every attribute that names a method of a generated kubernetes
client API class must be one whose request is a GET (checked in the client's own serializer source), and
no HTTP verb other than GET may be called through requests/urllib3/http.client.
"""

from __future__ import annotations

import ast
import inspect
from functools import cache
from pathlib import Path

import kubernetes.client as kclient

SOURCES = Path(__file__).resolve().parents[2] / "collectors" / "sources"
MUTATING_PREFIXES = ("create_", "patch_", "replace_", "delete_", "connect_", "evict")
HTTP_WRITE = {"post", "put", "patch", "delete", "request", "urlopen", "putrequest"}


def api_classes() -> set[str]:
    """The kubernetes API classes the sources instantiate (``client.CoreV1Api(...)``), plus the usual ones."""
    names = {"CoreV1Api", "BatchV1Api", "CustomObjectsApi"}
    for f in SOURCES.glob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Attribute) and node.attr.endswith("Api") and hasattr(kclient, node.attr):
                names.add(node.attr)
    return names


@cache
def api_methods() -> dict[str, list[type]]:
    """Endpoint method name → kubernetes API classes (of those the sources use) defining it."""
    out: dict[str, list[type]] = {}
    for name in sorted(api_classes()):
        cls = getattr(kclient, name)
        for meth in vars(cls):
            base = meth.removesuffix("_with_http_info").removesuffix("_without_preload_content")
            if not meth.startswith("_") and f"_{base}_serialize" in vars(cls):  # an API endpoint
                out.setdefault(meth, []).append(cls)
    return out


@cache
def http_method(cls: type, method: str) -> str:
    """The HTTP verb the generated client sends for ``cls.method`` (read from its serializer)."""
    base = method.removesuffix("_with_http_info").removesuffix("_without_preload_content")
    src = inspect.getsource(getattr(cls, f"_{base}_serialize"))
    verb = src.split("method='", 1)[1].split("'", 1)[0]
    return verb


def violations(source: str, filename: str = "<src>") -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Attribute):
            name = node.attr
            if name.startswith(MUTATING_PREFIXES):
                found.append(f"{filename}:{node.lineno}: {name} (mutating kubernetes verb)")
            elif name in api_methods():
                for cls in api_methods()[name]:
                    verb = http_method(cls, name)
                    if verb != "GET":
                        found.append(f"{filename}:{node.lineno}: {cls.__name__}.{name} sends {verb}")
            if isinstance(node.ctx, ast.Load) and name in HTTP_WRITE:
                found.append(f"{filename}:{node.lineno}: .{name}() is not a GET")
        elif isinstance(node, ast.keyword) and node.arg == "method":
            if not (isinstance(node.value, ast.Constant) and node.value.value == "GET"):
                found.append(f"{filename}:{node.lineno}: method={ast.unparse(node.value)}")
    return found


def test_it_finds_no_mutating_call_in_the_sources():
    files = sorted(SOURCES.glob("*.py"))
    assert len(files) >= 6
    problems = [v for f in files for v in violations(f.read_text(), f.name)]
    assert problems == []


def test_every_kubernetes_method_the_sources_use_is_a_get():
    used = set()
    for f in SOURCES.glob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in api_methods():
                used.add(node.attr)
    assert {
        "list_node",
        "list_pod_for_all_namespaces",
        "list_cluster_custom_object",
        "read_namespaced_pod_log",
    } <= used
    for name in used:
        for cls in api_methods()[name]:
            assert http_method(cls, name) == "GET", f"{cls.__name__}.{name}"


def test_the_scan_catches_writes():
    bad = (
        "def f(core, session, api):\n"
        "    core.delete_namespaced_pod('x', 'ns')\n"
        "    api.patch_node('n', {})\n"
        "    session.post('http://x')\n"
        "    session.request(method='DELETE', url='http://x')\n"
    )
    found = violations(bad)
    assert any("delete_namespaced_pod" in v for v in found)
    assert any("patch_node" in v for v in found)
    assert any(".post()" in v for v in found)
    assert any("method='DELETE'" in v for v in found)
    assert http_method(kclient.CoreV1Api, "delete_namespaced_pod") == "DELETE"


def test_the_shipped_cluster_role_grants_only_read_verbs():
    import yaml

    docs = list(yaml.safe_load_all((SOURCES.parents[1] / "deploy" / "rbac.yaml").read_text()))
    role = next(d for d in docs if d["kind"] == "ClusterRole")
    verbs = {v for rule in role["rules"] for v in rule["verbs"]}
    assert verbs <= {"get", "list", "watch"}
    resources = {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert ("", "secrets") not in resources and ("", "pods/log") in resources
    assert {("scheduling.run.ai", "queues"), ("kueue.x-k8s.io", "workloads"), ("batch", "jobs")} <= resources
    assert {d["kind"] for d in docs} >= {"ServiceAccount", "ClusterRole", "ClusterRoleBinding"}
