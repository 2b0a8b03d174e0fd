"""`make bench`: run every benchmark in bench/ against PostgreSQL and print one table.

Each script runs in its own process on its own PostgreSQL database (created if missing). Scripts that
accept ``--json`` feed the table; the full output of every script is kept in var/bench/<name>.log.
Figures depend on the machine: the table header names it and the date. Name scripts to run only those.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "var" / "bench"
PG = "postgres://postgres@127.0.0.1:5432/"
# (script, extra args, database) in the order a reader follows the pipeline.
RUNS = [
    ("intake.py", [], "rcaweb_bench"),
    ("collect.py", [], "rcaweb_bench_collect"),
    ("watch.py", [], "rcaweb_bench_watch"),
    ("asof.py", [], "rcaweb_bench"),
    ("pages.py", [], "rcaweb_bench_pages"),
    ("latency.py", ["--alerts", "20"], "rcaweb_bench_latency"),
    ("sim.py", ["--serving-only"], ""),
    ("diagnosis.py", [], ""),  # every bundled scenario + a 200-node busy cluster, temporary SQLite each
]


def run(script: str, extra: list[str], db: str) -> tuple[int, str, dict | None]:
    path = ROOT / "bench" / script
    if not path.exists():
        return 127, f"{script}: missing", None
    wants_json = '"--json"' in path.read_text()
    env = dict(os.environ, RCAWEB_SECRET_KEY=os.environ.get("RCAWEB_SECRET_KEY", "bench-only-secret"))
    if db:
        env["DATABASE_URL"] = PG + db
    if script == "latency.py":
        env.setdefault("REDIS_URL", "redis://127.0.0.1:6379/5")
    cmd = [sys.executable, str(path), *extra, *(["--json"] if wants_json else [])]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    out = proc.stdout + proc.stderr
    LOGS.mkdir(parents=True, exist_ok=True)
    (LOGS / f"{path.stem}.log").write_text(out)
    data = None
    for line in reversed(proc.stdout.strip().splitlines()):
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                data = json.loads(line)
            break
    print(f"  {script:12} exit {proc.returncode} in {time.perf_counter() - t0:.0f} s", flush=True)
    return proc.returncode, out, data


def main() -> int:
    print(f"rcaweb benchmarks, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
          f"{os.cpu_count()} cores, {platform.python_implementation()} {platform.python_version()}")
    only = set(sys.argv[1:])  # e.g. `python bench/run_all.py pages.py latency.py`
    results = {}
    for script, extra, db in RUNS:
        if only and script not in only:
            continue
        results[script] = run(script, extra, db)
    print("\n| benchmark | figure | value |\n|---|---|---|")
    for script, (code, out, data) in results.items():
        if data:
            for key, value in data.items():
                if key in ("bench",):
                    continue
                if isinstance(value, dict):  # e.g. pages: one row per page
                    for sub, v in value.items():
                        shown = ", ".join(f"{k} {x}" for k, x in v.items()) if isinstance(v, dict) else v
                        print(f"| {script} | {key}: {sub} | {shown} |")
                else:
                    print(f"| {script} | {key} | {json.dumps(value) if isinstance(value, list) else value} |")
        else:
            tail = [ln for ln in out.strip().splitlines() if ln.strip()][-6:]
            for ln in tail:
                print(f"| {script} | (output) | {ln.strip().replace('|', '/')} |")
        if code:
            print(f"| {script} | exit status | {code} (see var/bench/{Path(script).stem}.log) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
