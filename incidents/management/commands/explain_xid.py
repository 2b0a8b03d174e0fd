"""``python manage.py explain_xid CODE [--json]``: what an NVIDIA Xid means and whether to drain.

Thin wrapper over `incidents.diagnosis.xid.explain_xid`. An Xid outside the
catalog is answered with title "unknown Xid", drain_node false and known false
(exit status 0, with a note on stderr); a code that is not a non-negative
integer is an error (exit status 1).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from incidents.diagnosis.xid import explain_xid


class Command(BaseCommand):
    help = "Explain an NVIDIA Xid code from NVIDIA's Xid catalog."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("code", help="the Xid number, e.g. 79")
        parser.add_argument("--json", action="store_true", help="print one JSON document")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            d = explain_xid(opts["code"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if not d["known"]:
            self.stderr.write(f"Xid {d['xid']} is not in NVIDIA's Xid catalog as rcaweb knows it.")
        if opts["json"]:
            self.stdout.write(json.dumps(d, indent=2))
            return
        drain = "drain the node" if d["drain_node"] else "no drain needed"
        self.stdout.write(
            f"Xid {d['xid']}: {d['title']} (likely cause: {d['likely_cause']}; {drain}). {d['action']}"
        )
