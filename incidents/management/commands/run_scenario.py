"""``python manage.py run_scenario FILE [--json]``: a scenario through the real pipeline, in fast forward.

Thin (docs/conventions.md §22): it parses arguments, picks the database, and calls
``harness.scenario_run.run_scenario_file`` (driven by ``harness.driver``). By default every run gets a fresh
temporary SQLite database (``harness.database.use_temp_database``, migrated on the fly) so repeated runs
never mix; ``--database configured`` uses the configured one (the tests do, so the run lands in the test
database; a file or a server: the webhook's server threads open connections of their own). Exit status 0
when the run completed, whatever ``expect`` says; 2 for a bad scenario file (the loader's problems are printed).
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections


class Command(BaseCommand):
    help = "Run a scenario file through simulator, collectors, intake and diagnosis; print ranked hypotheses."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="scenario file (docs/scenarios.md §2, format 1)")
        parser.add_argument(
            "--json", action="store_true", help="print one JSON document (docs/scenarios.md §5)"
        )
        parser.add_argument(
            "--database",
            choices=["temp", "configured"],
            default="temp",
            help="temp (default): a fresh temporary SQLite database per run; configured: settings'",
        )
        parser.add_argument(
            "--sweep-every",
            type=int,
            default=900,
            metavar="SECONDS",
            help="idle inventory sweep cadence in simulated seconds (default 900; a sweep also runs "
            "whenever an alert starts firing or has been pending for a whole tick)",
        )

        parser.add_argument(
            "--sim-process",
            action="store_true",
            help="run the simulated cluster in a process of its own (its servers on another core than the "
            "pipeline; the same answers)",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        from datetime import timedelta

        from harness.database import use_temp_database
        from harness.scenario_run import run_scenario_file
        from simulator.scenario import ScenarioError, load_scenario

        path = Path(opts["file"])
        if not path.is_file():
            raise CommandError(f"{path}: no such scenario file", returncode=2)
        logging.getLogger("collectors").setLevel(logging.WARNING)
        logging.getLogger("incidents").setLevel(logging.WARNING)
        try:
            scenario = load_scenario(str(path))  # validate before creating a database for it
        except ScenarioError as exc:
            for where, line, msg in exc.problems:
                self.stderr.write(f"{where or path} (line {line}): {msg}")
            raise CommandError(f"{path}: bad scenario file ({len(exc.problems)} problem(s))", returncode=2)
        tmp = use_temp_database() if opts["database"] == "temp" else None
        try:
            result = run_scenario_file(
                scenario,
                sweep_every=timedelta(seconds=max(opts["sweep_every"], 60)),
                sim_process=opts["sim_process"],
            )
        finally:
            if tmp is not None:
                connections.close_all()
                shutil.rmtree(tmp, ignore_errors=True)
        if opts["json"]:
            self.stdout.write(json.dumps(result.to_dict(), indent=1))
            return
        self.stdout.write(
            f"scenario {result.scenario}: {len(result.incidents)} incident(s), "
            f"{result.timings.get('total_s')} s"
        )
        for inc in result.incidents:
            self.stdout.write(
                f"#{inc['id']} {', '.join(inc['alerts'])} — "
                + ", ".join(
                    f"{s['kind']} {s['namespace'] + '/' if s['namespace'] else ''}{s['name']}"
                    for s in inc["subjects"]
                )
            )
            for i, h in enumerate(inc["hypotheses"], start=1):
                self.stdout.write(
                    f"  {i}. {h['code']} [{h['status']} {h['confidence']:.2f}] {h['statement']}"
                )
        for e in result.expect:
            self.stdout.write(f"expect {e['alert']}: {'pass' if e['passed'] else 'FAIL ' + e['why']}")
