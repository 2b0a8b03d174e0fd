"""`make bench`: run every benchmark in bench/ against PostgreSQL, print one table and write it to bench/RESULTS.md.

Each script runs in its own process on its own PostgreSQL database (created if missing). Scripts that
accept ``--json`` feed the table; the full output of every script is kept in var/bench/<name>.log.
Figures depend on the machine: each script's section of bench/RESULTS.md names it and the date. Name
scripts to run only those: their sections are replaced, the others' kept as the last run wrote them.
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
    ("storage.py", [], "rcaweb_bench_storage"),  # the tuned inventory store against the ORM reference
    ("pages.py", [], "rcaweb_bench_pages"),
    ("latency.py", ["--alerts", "20"], "rcaweb_bench_latency"),
    ("sim.py", ["--serving-only"], ""),
    ("diagnosis.py", [], ""),  # every bundled scenario + a 200-node busy cluster, temporary SQLite each
    ("queue_order.py", [], ""),  # pure: the order's answers on a synthetic 1,213-node cluster, no database
]


def run(script: str, extra: list[str], db: str) -> tuple[int, str, dict | None]:
    path = ROOT / "bench" / script
    if not path.exists():
        return 127, f"{script}: missing", None
    wants_json = 'add_argument("--json"' in path.read_text()
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


RESULTS = ROOT / "bench" / "RESULTS.md"


def main() -> int:
    header = (f"rcaweb benchmarks, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
              f"{os.cpu_count()} cores, {platform.python_implementation()} {platform.python_version()}")
    print(header)
    only = set(sys.argv[1:])  # e.g. `python bench/run_all.py pages.py latency.py`
    results = {}
    for script, extra, db in RUNS:
        if only and script not in only:
            continue
        results[script] = run(script, extra, db)
    lines = table(results)
    print("\n" + "\n".join(lines))
    write_results(header, results, lines)
    print(f"\nwritten: {RESULTS.relative_to(ROOT)}")
    return 0


def write_results(header: str, results: dict[str, tuple[int, str, dict | None]], lines: list[str]) -> None:
    """Replace the sections of the scripts just run in bench/RESULTS.md; keep the others."""
    sections: dict[str, str] = {}
    if RESULTS.exists():
        for part in RESULTS.read_text().split("\n## ")[1:]:
            name = part.split("\n", 1)[0].strip().strip("`")
            sections[name] = "## " + part.rstrip() + "\n"
    for script in results:
        extra = next((e for s, e, _db in RUNS if s == script), [])
        rows = [ln for ln in lines[2:] if ln.startswith(f"| {script} |")]
        sections[script] = (f"## `{script}`\n\n{header}; command: `python bench/{' '.join([script, *extra])}`\n\n"
                            + "\n".join(lines[:2] + rows) + "\n")
    order = [s for s, _e, _db in RUNS] + sorted(set(sections) - {s for s, _e, _db in RUNS})
    RESULTS.write_text("# Benchmark results\n\nWritten by `make bench` (`bench/run_all.py`), one section per script, "
                       "each from its latest run.\n\n" + "\n".join(sections[s] for s in order if s in sections))


def table(results: dict[str, tuple[int, str, dict | None]]) -> list[str]:
    """The results as Markdown table rows: one row per figure a script printed as JSON, else its output's tail."""
    rows = ["| benchmark | figure | value |", "|---|---|---|"]
    add = rows.append
    for script, (code, out, data) in results.items():
        if data:
            for key, value in data.items():
                if key in ("bench",):
                    continue
                if isinstance(value, dict):  # e.g. pages: one row per page
                    for sub, v in value.items():
                        shown = ", ".join(f"{k} {x}" for k, x in v.items()) if isinstance(v, dict) else v
                        add(f"| {script} | {key}: {sub} | {shown} |")
                else:
                    add(f"| {script} | {key} | {json.dumps(value) if isinstance(value, list) else value} |")
        else:
            tail = [ln for ln in out.strip().splitlines() if ln.strip()][-6:]
            for ln in tail:
                add(f"| {script} | (output) | {ln.strip().replace('|', '/')} |")
        if code:
            add(f"| {script} | exit status | {code} (see var/bench/{Path(script).stem}.log) |")
    return rows


if __name__ == "__main__":
    sys.exit(main())
