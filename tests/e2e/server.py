"""The real rcaweb server for the browser tests: a scenario loaded through the real pipeline, served by
``deploy/serve``, the image's command.

Why a subprocess and not pytest-django's ``live_server``: the browser must see what an operator sees, so the
server runs with production settings (``RCAWEB_DEBUG=false``, no ``PYTEST_VERSION`` in its environment, so
no test-only shortcuts), in its own process, on a free loopback port. Its data comes from
``manage.py run_scenario --database configured`` on a fresh SQLite file: simulator → collectors → the
Alertmanager webhook → intake → evidence → diagnosis, exactly as in production, only in fast forward.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
SCENARIO = Path(__file__).resolve().parent / "scenario.yaml"
JOB = "llm/llama-ft"  # the scenario's crash-looping job
# A busy bundled scenario (18 nodes, overlapping faults): the page-shape and click-count tests run on it.
BUSY = REPO / "simulator" / "scenarios" / "busy-ecc-gang-kai.yaml"
BUSY_JOB = "llm/llm-pretrain"  # its gang job, pending behind a GPU the device plugin withdrew
USERNAME = "alice"
PASSWORD = "e2e-" + secrets.token_urlsafe(12)


@dataclass
class Server:
    """A running server and what the scenario produced (the ``run_scenario --json`` document)."""

    url: str
    run: dict[str, Any]
    proc: subprocess.Popen[bytes]
    logs: Path
    artifacts: Path
    timings: dict[str, float] = field(default_factory=dict)
    job: str = JOB

    @property
    def incident(self) -> dict[str, Any]:
        """The incident about the scenario's job (the crash-looping one every flow starts from)."""
        return next(i for i in self.run["incidents"] if _is_subject_incident(i, self.job))

    @property
    def netloc(self) -> str:
        return self.url.split("://", 1)[1]


def server_env(db_path: Path) -> dict[str, str]:
    """Production-like settings on a private SQLite file; nothing inherited that could point elsewhere."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("RCAWEB_", "PYTEST_", "DJANGO_")) and k not in ("DATABASE_URL", "REDIS_URL")
    }
    env.update(
        {
            "RCAWEB_DEBUG": "false",
            "RCAWEB_SECRET_KEY": secrets.token_urlsafe(40),
            "RCAWEB_SECURE_COOKIES": "false",  # plain http on loopback: secure cookies would never be sent back
            "RCAWEB_PLAIN_STATIC": "true",  # WhiteNoise serves from the finders; no collectstatic into var/
            "RCAWEB_SQLITE_PATH": str(db_path),
            "RCAWEB_CELERY_EAGER": "true",
            "RCAWEB_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "RCAWEB_LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _manage(args: list[str], env: dict[str, str], log: Path, timeout: float) -> str:
    """Run ``manage.py ARGS``; stdout is returned, stderr appended to ``log``; a failure says what and where."""
    cmd = [sys.executable, str(REPO / "manage.py"), *args]
    try:
        done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"e2e setup: `manage.py {' '.join(args)}` took over {timeout:.0f} s")
    with log.open("ab") as fh:
        fh.write(f"$ manage.py {' '.join(args)}\n".encode() + done.stderr)
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace")[-3000:]
        raise RuntimeError(f"e2e setup: `manage.py {' '.join(args)}` exited {done.returncode}:\n{tail}")
    return done.stdout.decode()


CREATE_USER = """
from django.contrib.auth.models import Group, User
u = User.objects.create_user({username!r}, password={password!r})
u.groups.add(Group.objects.get_or_create(name="responder")[0])
"""


def wait_until_up(url: str, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"e2e setup: gunicorn exited with {proc.returncode} before answering {url}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"e2e setup: {url} did not answer 200 within {timeout:.0f} s")
        time.sleep(0.1)  # polling a starting server; there is no event to wait on


_template: Path | None = None


def _fresh_database(db_path: Path, log: Path) -> None:
    """``db_path``: a migrated database with the responder, copied from one made once per test process.

    Every server of the session starts from the same empty schema and the same responder; ``migrate`` and
    the ``shell`` that creates the responder are Django processes of a few seconds each, so they run once,
    on a template beside the first server's directory, and each server gets a copy (SQLite's backup API:
    a consistent copy whatever the journal holds).
    """
    global _template
    if _template is None:
        template = db_path.parent.parent / "e2e-template.sqlite3"
        env = server_env(template)
        _manage(["migrate", "--noinput", "-v0"], env, log, timeout=120)
        _manage(
            ["shell", "-c", CREATE_USER.format(username=USERNAME, password=PASSWORD)], env, log, timeout=60
        )
        _template = template
    source, target = sqlite3.connect(_template), sqlite3.connect(db_path)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()


def start(
    workdir: Path,
    artifacts: Path,
    scenario: Path = SCENARIO,
    job: str = JOB,
    name: str = "server",
    scenario_timeout: float = 180,
) -> Server:
    """A migrated database with the responder, gunicorn started, the scenario run meanwhile; the caller stops
    ``proc``."""
    timings: dict[str, float] = {}
    log = artifacts / f"{name}.log"
    log.write_bytes(b"")
    db_path = workdir / f"{name}.sqlite3"
    env = server_env(db_path)
    t0 = time.monotonic()
    _fresh_database(db_path, log)
    timings["migrate_s"] = round(time.monotonic() - t0, 2)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [str(REPO / "deploy" / "serve"), f"127.0.0.1:{port}", "--workers", "2", "--timeout", "60",
           "--access-logfile", str(artifacts / ("access.log" if name == "server" else f"{name}-access.log")),
           "--access-logformat", '%(h)s "%(r)s" %(s)s %(b)s %(L)ss', *_no_control_socket()]  # fmt: skip
    # deploy/serve runs the gunicorn on PATH: this venv's
    serve_env = {**env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"}
    with log.open("ab") as fh:  # gunicorn boots while the scenario runs (it reads the database per request)
        proc = subprocess.Popen(cmd, cwd=REPO, env=serve_env, stdout=fh, stderr=subprocess.STDOUT)
    try:
        t0 = time.monotonic()
        out = _manage(
            ["run_scenario", str(scenario), "--database", "configured", "--json"],
            env,
            log,
            timeout=scenario_timeout,
        )
        timings["scenario_s"] = round(time.monotonic() - t0, 2)
        run = json.loads(out)
        if not any(_is_subject_incident(i, job) for i in run["incidents"]):
            raise RuntimeError(
                f"e2e setup: the scenario opened no incident about job {job}: {json.dumps(run)[:2000]}"
            )
        for e in run["expect"]:
            if not e["passed"]:  # the diagnosis tests judge this; the browser tests only need the incident
                logger.warning("e2e scenario expectation not met: %s", e)
        wait_until_up(url + "/healthz", proc)
    except BaseException:
        stop(proc)
        raise
    logger.info("e2e server on %s (%s)", url, timings)
    return Server(url=url, run=run, proc=proc, logs=log, artifacts=artifacts, timings=timings, job=job)


def _no_control_socket() -> list[str]:
    """gunicorn >= 27 opens a control socket at one fixed path per user; parallel test servers must not share it."""
    import gunicorn

    return ["--no-control-socket"] if int(gunicorn.__version__.split(".")[0]) >= 27 else []


def _is_subject_incident(incident: dict[str, Any], job: str = JOB) -> bool:
    return any(s["kind"] == "job" and f"{s['namespace']}/{s['name']}" == job for s in incident["subjects"])


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the gunicorn this module started (by its own pid)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
