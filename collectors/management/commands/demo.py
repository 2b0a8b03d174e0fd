"""``python manage.py demo [--serve 127.0.0.1:8000] [--speed N]``: the demo scenario, collected and served.

Thin: parses arguments and runs :class:`harness.demo.Demo` (see its docstring for what happens).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from harness.demo import DEMO_SCENARIO, Demo, DemoOptions


class Command(BaseCommand):
    help = (
        "Run the simulated demo cluster up to now through the real collectors, then serve the console live."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--serve", default="127.0.0.1:8000", metavar="HOST:PORT", help="address to serve on"
        )
        parser.add_argument(
            "--no-serve", action="store_true", help="fast-forward to now, print the login, exit"
        )
        parser.add_argument("--speed", type=float, default=1.0, help="simulated seconds per second once live")
        parser.add_argument(
            "--scenario", default=str(DEMO_SCENARIO), help="scenario file (default: the demo)"
        )
        parser.add_argument(
            "--sweep-every",
            type=int,
            default=20,
            metavar="MINUTES",
            help="simulated minutes between inventory sweeps while fast-forwarding",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        from simulator.scenario import ScenarioError

        if opts["speed"] <= 0:
            raise CommandError("--speed must be positive")
        if opts["sweep_every"] < 1:
            raise CommandError("--sweep-every must be at least 1 minute")
        options = DemoOptions(
            scenario=opts["scenario"],
            serve=None if opts["no_serve"] else opts["serve"],
            speed=opts["speed"],
            sweep_every=timedelta(minutes=opts["sweep_every"]),
        )
        try:
            Demo(options, out=self.stdout.write).run()
        except ScenarioError as exc:
            raise CommandError(f"{opts['scenario']}: {exc}")
        except ValueError as exc:
            raise CommandError(str(exc))
        except OSError as exc:
            raise CommandError(f"cannot serve on {opts['serve']}: {exc.strerror or exc}")
