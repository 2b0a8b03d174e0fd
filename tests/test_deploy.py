"""The compose file and deploy manifests parse, and what they name exists in the code."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SETTINGS_TEXT = (ROOT / "rcaweb" / "settings.py").read_text()


def _env_names_read_by_settings() -> set[str]:
    names = set(re.findall(r'env(?:bool|int|secret|duration)?\("([A-Z_]+)"', SETTINGS_TEXT))
    names |= set(re.findall(r'os\.environ\.get\("([A-Z_]+)"', SETTINGS_TEXT))
    return names | {f"{n}_FILE" for n in re.findall(r'envsecret\("([A-Z_]+)"', SETTINGS_TEXT)}


def test_compose_has_the_production_services_with_healthchecks():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"postgres", "redis", "migrate", "web", "worker", "beat"} <= set(services)
    assert services["postgres"]["image"].startswith("postgres:16")
    assert services["redis"]["image"].startswith("redis:7")
    for name in ("postgres", "redis", "web", "worker"):
        assert "healthcheck" in services[name], name
    assert services["web"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def test_compose_commands_name_real_modules():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    for svc in compose["services"].values():
        cmd = svc.get("command") or []
        if cmd[:1] == ["gunicorn"]:
            module, attr = cmd[1].split(":")
            assert hasattr(importlib.import_module(module), attr)
        if cmd[:1] == ["celery"]:
            app = importlib.import_module(cmd[cmd.index("-A") + 1])
            assert hasattr(app, "celery_app")
        if cmd[:2] == ["python", "manage.py"]:
            from django.core.management import get_commands

            assert cmd[2] in get_commands()


def test_every_env_variable_named_anywhere_is_read_by_settings():
    read = _env_names_read_by_settings()
    example = [line.split("=", 1)[0].lstrip("# ") for line in (ROOT / ".env.example").read_text().splitlines() if "=" in line]
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    named = set(example) | set(compose["x-rcaweb"]["environment"])
    for doc in yaml.safe_load_all((ROOT / "deploy" / "deployment.yaml").read_text()):
        for c in (doc or {}).get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            named |= {e["name"] for e in c.get("env", [])}
    unknown = sorted(n for n in named if n.startswith(("RCAWEB_", "DATABASE_", "REDIS_")) and n not in read)
    assert not unknown, f"named in deploy files but never read by settings: {unknown}"


def test_deploy_manifests_parse_as_kubernetes_objects():
    for path in sorted((ROOT / "deploy").glob("*.yaml")):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        assert docs, path
        if path.name == "alertmanager-receiver.yaml":
            assert docs[0]["receivers"][0]["webhook_configs"][0]["url"].endswith("/api/v1/alerts/alertmanager")
            continue
        for d in docs:
            assert d.get("apiVersion") and d.get("kind"), f"{path.name}: {d}"


def test_example_rules_name_alerts_the_simulator_and_grouping_know():
    rules = yaml.safe_load((ROOT / "deploy" / "prometheusrules.yaml").read_text())
    names = {r["alert"] for g in rules["spec"]["groups"] for r in g["rules"]}
    assert {"GPUXidError", "GPUMissing", "GPUJobPendingTooLong", "NodeNotReady", "PodCrashLooping", "GPUIdleAllocated",
            "GPUHighTemperature", "GPUECCDoubleBitError"} <= names


def test_env_example_lists_every_variable_settings_read():
    example = {line.split("=", 1)[0].lstrip("# ").strip() for line in (ROOT / ".env.example").read_text().splitlines() if "=" in line}
    read = {n for n in _env_names_read_by_settings() if not n.endswith("_FILE")}
    assert not sorted(read - example), f"missing from .env.example: {sorted(read - example)}"
