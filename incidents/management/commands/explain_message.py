"""``python manage.py explain_message "<text>" [--reason R] [--json]``: read one scheduler message.

Thin wrapper over `incidents.diagnosis.messages.parse_message`: paste a
FailedScheduling event, a Kueue Workload condition or a KAI PodGroup condition
and see which scheduler wrote it, the classified reasons and a one-line summary.
Reads the text from stdin when it is "-".
"""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from incidents.diagnosis.messages import parse_message


class Command(BaseCommand):
    help = "Parse a kube-scheduler, Kueue or KAI Scheduler message and explain it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("text", help='the message text, or "-" to read it from stdin')
        parser.add_argument(
            "--reason", default=None, help="the condition/event reason, e.g. ExceedsMaxQuota (optional)"
        )
        parser.add_argument("--json", action="store_true", help="print the parse as one JSON document")

    def handle(self, *args: Any, **opts: Any) -> None:
        text = sys.stdin.read() if opts["text"] == "-" else opts["text"]
        if not text.strip():
            raise CommandError("the message text is empty")
        parsed = parse_message(text, reason=opts["reason"])
        if opts["json"]:
            self.stdout.write(json.dumps(parsed.to_dict(), indent=2))
            return
        self.stdout.write(f"[{parsed.source}] {parsed.summary}")
