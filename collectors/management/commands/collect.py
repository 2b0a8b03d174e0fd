"""``python manage.py collect --cluster NAME [--once] [--kind inventory|telemetry|events|all]``: sweep by hand.

Prints what each sweep wrote (entities seen, versions opened, changes, errors) and, for large clusters, a
progress line as pods are listed. Without ``--once`` it keeps sweeping at the configured intervals.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from collectors import sweep
from collectors.models import Cluster


class Command(BaseCommand):
    help = "Sweep a cluster's sources into the inventory now and print what was written."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", required=True, help="cluster name (see the admin or `Cluster` rows)")
        parser.add_argument(
            "--once", action="store_true", help="one sweep, then exit (default: keep sweeping)"
        )
        parser.add_argument("--kind", choices=["inventory", "telemetry", "events", "all"], default="all")

    def handle(self, *args: Any, **opts: Any) -> None:
        name = opts["cluster"]
        if not Cluster.objects.filter(name=name).exists():
            known = ", ".join(Cluster.objects.values_list("name", flat=True)) or "none configured"
            raise CommandError(f"unknown cluster {name!r} (known: {known})")
        kinds = ["inventory", "telemetry", "events"] if opts["kind"] == "all" else [opts["kind"]]
        failed = False
        while True:
            for kind in kinds:
                failed |= not self._one(name, kind)
            if opts["once"]:
                break
            time.sleep(settings.RCAWEB_SWEEP_INVENTORY_S)
        if failed:
            self.stderr.write(
                "some sources failed: see the errors above (they are recorded as collection errors)"
            )

    def _one(self, name: str, kind: str) -> bool:
        tty = self.stdout.isatty() if hasattr(self.stdout, "isatty") else sys.stdout.isatty()

        def progress(what: str, n: int) -> None:
            if tty:
                self.stdout.write(f"\r  {kind}: {what} {n:>7}", ending="")
                self.stdout.flush()

        if kind == "inventory":
            summary = sweep.sweep_cluster(name, progress=progress)
        elif kind == "telemetry":
            summary = sweep.sweep_telemetry(name)
        else:
            summary = sweep.sweep_events(name)
        if tty:
            self.stdout.write("\r" + " " * 60 + "\r", ending="")
        self.stdout.write(summary.line())
        for err in summary.errors:
            self.stdout.write(f"  error: {err}")
        for metric in summary.no_data:
            self.stdout.write(f"  no data: {metric}")
        if summary.skipped_kinds:
            self.stdout.write(
                f"  not recorded (a source they need failed): {', '.join(summary.skipped_kinds)}"
            )
        return summary.ok
