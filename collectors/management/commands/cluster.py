"""``manage.py cluster add|list|remove|check``: the clusters rcaweb watches, from the command line.

    cluster add NAME (--kubeconfig PATH | --in-cluster) --prometheus URL [--scheduler kai|kueue|default]
                [--runai URL] [--replace]
    cluster list
    cluster remove NAME --yes
    cluster check NAME        # one read of each kind from every source; exits 1 when one fails

See README "Watch a real cluster" for the RBAC (deploy/rbac.yaml) and the Prometheus it needs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.validators import validate_slug
from django.db import transaction

from collectors.models import Cluster
from collectors.sources.endpoints import EndpointError, check_url, shown_url
from collectors.sources.kubeconfig import KubeconfigError, check_kubeconfig

SCHEDULERS = [key for key, _ in Cluster.SCHEDULERS]


class Command(BaseCommand):
    help = "Register, list, remove and check the clusters rcaweb watches."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True, parser_class=type(parser))
        add = sub.add_parser("add", help="register a cluster (Kubernetes API + Prometheus [+ Run:ai])")
        add.add_argument("name", help="a short slug: letters, digits, - and _ (shown in URLs)")
        where = add.add_mutually_exclusive_group(required=True)
        where.add_argument("--kubeconfig", help="kubeconfig file (its current context is used)")
        where.add_argument(
            "--in-cluster",
            action="store_true",
            help="use the pod's service account (rcaweb runs in the cluster)",
        )
        add.add_argument("--prometheus", required=True, help="Prometheus URL that scrapes dcgm-exporter")
        add.add_argument(
            "--scheduler", choices=SCHEDULERS, default="kai", help="the cluster's scheduler (default kai)"
        )
        add.add_argument("--runai", default="", help="Run:ai control-plane URL (token: RCAWEB_RUNAI_TOKEN)")
        add.add_argument(
            "--replace", action="store_true", help="overwrite a cluster of that name (its data stays)"
        )
        sub.add_parser("list", help="the registered clusters")
        remove = sub.add_parser("remove", help="unregister a cluster and delete everything recorded about it")
        remove.add_argument("name")
        remove.add_argument(
            "--yes", action="store_true", help="confirm: its inventory and incidents are deleted"
        )
        check = sub.add_parser(
            "check", help="read one object of each kind from every source; exit 1 on a failure"
        )
        check.add_argument("name")
        check.add_argument(
            "--timeout", type=float, default=None, help="seconds per call (RCAWEB_SOURCE_TIMEOUT_S)"
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        getattr(self, f"_{opts['action']}")(opts)

    #
    # Actions
    #

    def _add(self, opts: dict[str, Any]) -> None:
        name = opts["name"]
        try:
            validate_slug(name)
        except ValidationError as exc:
            raise CommandError(f"cluster name {name!r}: use letters, digits, '-' and '_' only") from exc
        if len(name) > 63:
            raise CommandError(f"cluster name {name!r}: at most 63 characters")
        kubeconfig = ""
        if opts["kubeconfig"]:
            path = Path(opts["kubeconfig"]).expanduser()
            if not path.is_file():
                raise CommandError(f"--kubeconfig {opts['kubeconfig']}: no such file")
            kubeconfig = str(path.resolve())
            _load_kubeconfig(kubeconfig)
        for flag, url in (("--prometheus", opts["prometheus"]), ("--runai", opts["runai"])):
            # not URLValidator: it refuses the short in-cluster names (http://prometheus:9090) people use
            try:
                if url:
                    check_url(flag, url)
            except EndpointError as exc:
                raise CommandError(str(exc)) from None
        values = {
            "scheduler": opts["scheduler"],
            "kubeconfig": kubeconfig,
            "prometheus_url": opts["prometheus"],
            "runai_url": opts["runai"],
        }
        with transaction.atomic():
            existing = Cluster.objects.filter(name=name).first()
            if existing is not None and not opts["replace"]:
                raise CommandError(
                    f"cluster {name!r} exists (--replace overwrites it; `cluster remove` deletes it)"
                )
            cluster, created = Cluster.objects.update_or_create(name=name, defaults=values)
        self.stdout.write(
            f"{'added' if created else 'updated'} cluster {cluster.name}: kubernetes "
            f"{kubeconfig or 'in-cluster service account'}, prometheus {shown_url(cluster.prometheus_url)}"
            + (f", run:ai {shown_url(cluster.runai_url)}" if cluster.runai_url else "")
            + f", scheduler {cluster.scheduler}"
        )
        self.stdout.write(f"next: python manage.py cluster check {cluster.name}")

    def _list(self, opts: dict[str, Any]) -> None:
        rows = [
            [
                c.name,
                c.scheduler,
                c.kubeconfig or "(in-cluster)",
                shown_url(c.prometheus_url),  # a cluster added before credentials were refused
                shown_url(c.runai_url) or "-",
            ]
            for c in Cluster.objects.order_by("name")
        ]
        if not rows:
            self.stdout.write("no clusters (python manage.py cluster add NAME ...)")
            return
        self._table(["NAME", "SCHEDULER", "KUBERNETES", "PROMETHEUS", "RUN:AI"], rows)

    def _remove(self, opts: dict[str, Any]) -> None:
        cluster = _get(opts["name"])
        if not opts["yes"]:
            raise CommandError(
                f"removing {cluster.name!r} deletes its inventory history and incidents; confirm with --yes"
            )
        _, counts = cluster.delete()
        detail = ", ".join(f"{n} {label.split('.')[-1]}" for label, n in sorted(counts.items()) if n)
        self.stdout.write(f"removed cluster {opts['name']} ({detail})")

    def _check(self, opts: dict[str, Any]) -> None:
        from collectors.clustercheck import check_cluster

        cluster = _get(opts["name"])
        checks = check_cluster(cluster, timeout=opts["timeout"])
        rows = [
            [
                c.source,
                c.call,
                "ok" if c.ok else "error",
                f"{c.latency_ms:.0f} ms" if c.latency_ms is not None else "-",
                c.detail,
            ]
            for c in checks
        ]
        self._table(["SOURCE", "CALL", "RESULT", "LATENCY", "DETAIL"], rows)
        failed = [c for c in checks if not c.ok]
        if failed:
            raise CommandError(
                f"{len(failed)} of {len(checks)} checks failed for cluster {cluster.name}: "
                + "; ".join(f"{c.source} {c.call}: {c.detail}" for c in failed),
                returncode=1,
            )
        self.stdout.write(f"all {len(checks)} checks passed for cluster {cluster.name}")

    def _table(self, header: list[str], rows: list[list[str]]) -> None:
        widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header) - 1)]
        for r in [header, *rows]:
            cells = [str(v).ljust(w) for v, w in zip(r[:-1], widths, strict=True)]
            self.stdout.write("  ".join([*cells, str(r[-1])]).rstrip())


def _get(name: str) -> Cluster:
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        known = ", ".join(Cluster.objects.values_list("name", flat=True)) or "none registered"
        raise CommandError(f"unknown cluster {name!r} (known: {known})")
    return cluster


def _load_kubeconfig(path: str) -> None:
    """Refuse a file the kubernetes client cannot use, naming why (before anything is saved); a file too large
    or a YAML alias bomb is refused before the client reads it (collectors/sources/kubeconfig.py)."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    try:
        check_kubeconfig(path)
    except KubeconfigError as exc:
        raise CommandError(f"--kubeconfig {path}: {exc}") from None
    try:
        config.load_kube_config(
            config_file=path, client_configuration=client.Configuration(), persist_config=False
        )
    except (ConfigException, OSError, ValueError, TypeError) as exc:
        raise CommandError(f"--kubeconfig {path}: the kubernetes client cannot use it: {exc}") from exc
