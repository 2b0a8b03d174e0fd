"""``manage.py simulate FILE``: serve a scenario's simulated cluster live on loopback."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = (
        "Serve a scenario's simulated GPU cluster (Kubernetes API, Prometheus, Run:ai, alerts) in real time."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="scenario YAML file (docs/scenarios.md §2, format 1)")
        parser.add_argument(
            "--speed",
            type=float,
            default=1.0,
            help="simulated seconds per wall-clock second (60 = a minute per second)",
        )
        parser.add_argument("--alert-url", default=None, help="Alertmanager webhook URL to post alerts to")
        parser.add_argument("--alert-token", default=None, help="bearer token for the alert webhook")
        parser.add_argument(
            "--keep-start",
            action="store_true",
            help="keep the file's start time (a replay) instead of starting the scenario at the wall clock",
        )
        parser.add_argument(
            "--port-base",
            type=int,
            default=0,
            help="kube API on N, Prometheus on N+1, Run:ai on N+2 (default: free ports)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from simulator.scenario import ScenarioError
        from simulator.server import serve_scenario

        if options["speed"] <= 0:
            raise CommandError("--speed must be positive")
        try:
            serve_scenario(
                options["file"],
                speed=options["speed"],
                alert_url=options["alert_url"],
                alert_token=options["alert_token"],
                port_base=options["port_base"],
                out=self.stdout,
                keep_start=options["keep_start"],
            )
        except ScenarioError as exc:
            raise CommandError(str(exc)) from exc
