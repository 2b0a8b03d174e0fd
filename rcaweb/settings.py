"""rcaweb settings: one env-driven module (docs/conventions.md §18).

Embedded defaults (SQLite under var/, Celery eager) make `make demo` and
`make test` work on a bare machine; DATABASE_URL and REDIS_URL switch to
PostgreSQL and Redis. Every variable is listed in .env.example.
"""

from __future__ import annotations

import math
import os
from datetime import timedelta
from pathlib import Path
from urllib.parse import unquote, urlparse

from django.core.exceptions import ImproperlyConfigured

from rcaweb import gc_policy
from rcaweb.durations import parse_duration

BASE_DIR = Path(__file__).resolve().parent.parent


def envbool(name: str, default: bool) -> bool:
    """Strict boolean: only true/false/1/0/yes/no, anything else is an error."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name}={raw!r}: expected true or false")


def envint(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r}: expected an integer")


def envduration(name: str, default: str) -> timedelta:
    """``30s``, ``15m``, ``1h``, ``1h30m``, ``1d`` (as the cursor's ``w`` is written) or ``0``; else an error."""
    raw = (os.environ.get(name) or default).strip()
    if raw == "0":
        return timedelta(0)
    try:
        return parse_duration(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r}: expected a duration such as 30s, 15m, 1h or 1h30m") from None


def envsecret(name: str, default: str = "") -> str:
    """Read NAME, or the file named by NAME_FILE (Kubernetes secret mounts)."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={path!r}: cannot read ({exc})")
    return os.environ.get(name, default)


# SQLite has one writer. WAL: pages and the webhook's reads never wait for a writer, and a commit appends to the
# log (synchronous=FULL: on disk before the webhook answers, so an accepted alert survives a power loss).
# IMMEDIATE: every transaction (Django opens one only to write) takes the write lock at BEGIN, where SQLite
# waits up to ``timeout`` seconds for it; a deferred one that upgrades from read to write while another
# connection writes fails at once with "database is locked", busy timeout or not.
SQLITE_OPTIONS = {
    "timeout": 20,
    "transaction_mode": "IMMEDIATE",
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL",
}


def database_from_url(url: str) -> dict:
    parsed = urlparse(url)
    if parsed.scheme in ("postgres", "postgresql"):
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parsed.path.lstrip("/")),
            "USER": unquote(parsed.username or ""),
            "PASSWORD": unquote(parsed.password or ""),
            "HOST": parsed.hostname or "",
            "PORT": str(parsed.port or ""),
            "CONN_MAX_AGE": envint("RCAWEB_DB_CONN_MAX_AGE", 60),
            "CONN_HEALTH_CHECKS": True,
            "OPTIONS": {"connect_timeout": 5},
        }
    if parsed.scheme == "sqlite":
        name = url.split("sqlite:///", 1)[1] if "sqlite:///" in url else ":memory:"
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": name, "OPTIONS": dict(SQLITE_OPTIONS)}
    raise ImproperlyConfigured(f"DATABASE_URL={url!r}: expected postgres://… or sqlite:///…")


DEBUG = envbool("RCAWEB_DEBUG", False)
# pytest (>= 8.2) sets PYTEST_VERSION before settings load: tests get safe fixed values.
TESTING = "PYTEST_VERSION" in os.environ
if TESTING:
    os.environ.setdefault("RCAWEB_SECRET_KEY", "test-only-secret-key-not-for-production")
    os.environ.setdefault("RCAWEB_WEBHOOK_TOKEN", "test-webhook-token")
    os.environ.setdefault("RCAWEB_API_TOKEN", "test-api-token")
    os.environ.setdefault("RCAWEB_PLAIN_STATIC", "true")
    os.environ.setdefault("RCAWEB_SECURE_COOKIES", "false")
_DEFAULT_SECRET = "rcaweb-insecure-development-key-change-me"
SECRET_KEY = envsecret("RCAWEB_SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "RCAWEB_SECRET_KEY is missing: set it (or RCAWEB_SECRET_KEY_FILE), or set RCAWEB_DEBUG=true for development"
        )
    SECRET_KEY = _DEFAULT_SECRET

ALLOWED_HOSTS = [h.strip() for h in os.environ.get("RCAWEB_ALLOWED_HOSTS", "127.0.0.1,localhost").split(",") if h.strip()]
if DEBUG:
    ALLOWED_HOSTS += ["testserver"]

# Bearer tokens for webhooks. Two may be valid at once so a token rotates without downtime.
WEBHOOK_TOKENS = [
    t for t in (envsecret("RCAWEB_WEBHOOK_TOKEN", ""), envsecret("RCAWEB_WEBHOOK_TOKEN_PREVIOUS", "")) if t
]
# Bearer tokens that read the API (GET /api/v1/incidents/<id>): a scope of their own, so the webhook's
# token, which Alertmanager and CI hold, can write alerts and changes but read nothing back.
API_TOKENS = [t for t in (envsecret("RCAWEB_API_TOKEN", ""), envsecret("RCAWEB_API_TOKEN_PREVIOUS", "")) if t]
METRICS_TOKEN = envsecret("RCAWEB_METRICS_TOKEN", "")


def base_url(value: str) -> str:
    """``RCAWEB_BASE_URL``: where operators reach rcaweb (``https://rcaweb.example.org``), for absolute links in
    exports; empty = the host each export was requested on."""
    value = value.strip().rstrip("/")
    if not value:
        return ""
    p = urlparse(value)
    if p.scheme not in ("http", "https") or not p.netloc or p.query or p.fragment or p.params:
        raise ImproperlyConfigured(
            f"RCAWEB_BASE_URL={value!r}: expected http(s)://host[:port][/prefix], without query or fragment"
        )
    return value


RCAWEB_BASE_URL = base_url(os.environ.get("RCAWEB_BASE_URL", ""))

INSTALLED_APPS = [
    "rcaweb.apps.RcaAdminConfig",  # django.contrib.admin, its login page behind the one login (rcaweb.admin_site)
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "rcaweb",
    "collectors",
    "incidents",
    "web",
]

MIDDLEWARE = [
    # first: its headers reach every answer, the 400s and 503s of the middleware below included
    "rcaweb.middleware.SecurityHeadersMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "rcaweb.middleware.ApiErrorsMiddleware",
    "rcaweb.middleware.RequestIdMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "rcaweb.middleware.TextInputMiddleware",
    "rcaweb.middleware.CursorMiddleware",
    # every view needs a login unless it is marked @login_not_required: login itself, the health probes, and
    # the API and metrics, which check their own bearer token (docs/decisions.md)
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
]

ROOT_URLCONF = "rcaweb.urls"
WSGI_APPLICATION = "rcaweb.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "OPTIONS": {
            # one template engine, its templates compiled once per process (docs/conventions.md §7)
            "loaders": [
                (
                    "django.template.loaders.cached.Loader",
                    [
                        "django.template.loaders.filesystem.Loader",
                        "django.template.loaders.app_directories.Loader",
                    ],
                )
            ],
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "rcaweb.context_processors.cursor",
            ],
            "builtins": ["web.templatetags.rcaweb"],
        },
    }
]

DATABASE_URL = os.environ.get("DATABASE_URL", "")
if DATABASE_URL:
    DATABASES = {"default": database_from_url(DATABASE_URL)}
else:
    (BASE_DIR / "var").mkdir(exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("RCAWEB_SQLITE_PATH", str(BASE_DIR / "var" / "rcaweb.sqlite3")),
            "OPTIONS": dict(SQLITE_OPTIONS),
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "var" / "static"
# plotly.js is served from the plotly Python package (no CDN: clusters are often air-gapped).
import plotly as _plotly  # noqa: E402

STATICFILES_DIRS = [BASE_DIR / "static", ("vendor/plotly", str(Path(_plotly.__file__).resolve().parent / "package_data"))]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG or envbool("RCAWEB_PLAIN_STATIC", False)
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = True

# Passwords are checked only under the login policy (rcaweb/throttle.py), whatever form asks for one.
AUTHENTICATION_BACKENDS = ["rcaweb.throttle.ThrottledModelBackend"]

# OIDC single sign-on (mozilla-django-oidc), off by default. Users it creates start as viewers.
OIDC_ENABLED = envbool("RCAWEB_OIDC_ENABLED", False)
if OIDC_ENABLED:
    INSTALLED_APPS.append("mozilla_django_oidc")
    AUTHENTICATION_BACKENDS.insert(0, "mozilla_django_oidc.auth.OIDCAuthenticationBackend")
    OIDC_RP_CLIENT_ID = os.environ.get("RCAWEB_OIDC_CLIENT_ID", "")
    OIDC_RP_CLIENT_SECRET = envsecret("RCAWEB_OIDC_CLIENT_SECRET", "")
    OIDC_RP_SIGN_ALGO = os.environ.get("RCAWEB_OIDC_SIGN_ALGO", "RS256")
    OIDC_OP_AUTHORIZATION_ENDPOINT = os.environ.get("RCAWEB_OIDC_AUTHORIZATION_ENDPOINT", "")
    OIDC_OP_TOKEN_ENDPOINT = os.environ.get("RCAWEB_OIDC_TOKEN_ENDPOINT", "")
    OIDC_OP_USER_ENDPOINT = os.environ.get("RCAWEB_OIDC_USER_ENDPOINT", "")
    OIDC_OP_JWKS_ENDPOINT = os.environ.get("RCAWEB_OIDC_JWKS_ENDPOINT", "")
    _missing = [n for n, v in (("RCAWEB_OIDC_CLIENT_ID", OIDC_RP_CLIENT_ID), ("RCAWEB_OIDC_AUTHORIZATION_ENDPOINT", OIDC_OP_AUTHORIZATION_ENDPOINT), ("RCAWEB_OIDC_TOKEN_ENDPOINT", OIDC_OP_TOKEN_ENDPOINT)) if not v]
    if _missing:
        raise ImproperlyConfigured(f"RCAWEB_OIDC_ENABLED is true but {', '.join(_missing)} is missing")

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

SESSION_COOKIE_SECURE = not DEBUG and envbool("RCAWEB_SECURE_COOKIES", True)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
# HSTS on HTTPS answers when not DEBUG (Django sends it only on secure requests). 0 turns it off.
SECURE_HSTS_SECONDS = 0 if DEBUG else envint("RCAWEB_HSTS_SECONDS", 31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("RCAWEB_HSTS_INCLUDE_SUBDOMAINS", False)
# Behind a TLS-terminating proxy: trust its X-Forwarded-Proto so Django knows the request was HTTPS.
if envbool("RCAWEB_TRUST_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}  # per process: nothing shared lives here
# Login throttling (rcaweb/throttle.py, counts in the database): free failures per username, per username and
# address, and per address (for usernames unknown there), then a doubling delay (429 + Retry-After) capped at
# LOGIN_MAX_DELAY_S.
LOGIN_FREE_ATTEMPTS = envint("RCAWEB_LOGIN_FREE_ATTEMPTS", 5)
LOGIN_MAX_DELAY_S = envint("RCAWEB_LOGIN_MAX_DELAY_S", 900)
DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024  # Alertmanager bodies over 1 MiB are a 413

# Celery: no REDIS_URL -> tasks run inline (demo, make test).
REDIS_URL = os.environ.get("REDIS_URL", "")
# Tests run tasks inline even on Redis, except the real-worker tests, which switch it off themselves.
CELERY_TASK_ALWAYS_EAGER = envbool("RCAWEB_CELERY_EAGER", TESTING or not REDIS_URL)
CELERY_TASK_EAGER_PROPAGATES = False
# Without workers (eager), who runs grouping, evidence and diagnosis: "thread", one background thread in this
# process after the webhook answered (incidents/inline_worker.py); "sync", inline in the request (tests: deterministic).
RCAWEB_INLINE_PROCESSING = os.environ.get("RCAWEB_INLINE_PROCESSING", "sync" if TESTING else "thread")
# Evidence collections of one problem within this many seconds share their Prometheus answers (0: never).
RCAWEB_EVIDENCE_SHARE_S = envint("RCAWEB_EVIDENCE_SHARE_S", 0 if TESTING else 60)
if RCAWEB_INLINE_PROCESSING not in ("sync", "thread"):
    raise ImproperlyConfigured(
        f"RCAWEB_INLINE_PROCESSING={RCAWEB_INLINE_PROCESSING!r}: expected sync or thread"
    )
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_TIMEOUT = 2
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5}
# A task whose worker died (SIGKILL, OOM, lost node) stays unacked in Redis and is redelivered after the
# visibility timeout, which must exceed the longest task or a running task is delivered twice (kombu's default,
# 1 h). The fault tests lower it to seconds, and then scan for such tasks every second rather than every 100 s.
_BROKER_VISIBILITY_S = envint("RCAWEB_BROKER_VISIBILITY_TIMEOUT_S", 3600)
CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"] = _BROKER_VISIBILITY_S
if _BROKER_VISIBILITY_S < 600:
    CELERY_BROKER_TRANSPORT_OPTIONS |= {"unacked_restore_interval": 1, "unacked_restore_throttle": 1}
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE: dict = {}  # filled when the Celery app finalizes: `rcaweb.celery._wire_beat_schedule` adds each app's `tasks.beat_schedule()`

# Sweeps (seconds)
RCAWEB_SWEEP_INVENTORY_S = envint("RCAWEB_SWEEP_INVENTORY_S", 30)
RCAWEB_SWEEP_TELEMETRY_S = envint("RCAWEB_SWEEP_TELEMETRY_S", 60)
RCAWEB_SWEEP_EVENTS_S = envint("RCAWEB_SWEEP_EVENTS_S", 15)
# Watch-based inventory (collectors/sweep/watch.py): list once, then watch; off = the periodic sweep above.
RCAWEB_WATCH = envbool("RCAWEB_WATCH", False)
RCAWEB_WATCH_RELIST_S = envint("RCAWEB_WATCH_RELIST_S", 3600)  # the safety-net relist (writes only differences)
RCAWEB_WATCH_APPLY_S = envint("RCAWEB_WATCH_APPLY_S", 5)  # watch events are recorded at most this often
RCAWEB_WATCH_TIMEOUT_S = envint("RCAWEB_WATCH_TIMEOUT_S", 300)  # one watch request's timeoutSeconds
RCAWEB_WATCH_LEASE_S = envint("RCAWEB_WATCH_LEASE_S", 120)  # a dead worker's cluster is watched again after this
# One watch task's length, below the broker's visibility timeout (a longer task would be delivered twice);
# beat starts one every RCAWEB_WATCH_CHECK_S per cluster, which returns at once while a session holds the lease.
# (a minute below it, or half of a visibility timeout shorter than two minutes).
_WATCH_SESSION_DEFAULT_S = max(1, min(3000, max(_BROKER_VISIBILITY_S - 60, _BROKER_VISIBILITY_S // 2)))
RCAWEB_WATCH_SESSION_S = envint("RCAWEB_WATCH_SESSION_S", _WATCH_SESSION_DEFAULT_S)
RCAWEB_WATCH_CHECK_S = envint("RCAWEB_WATCH_CHECK_S", 30)
for _name in ("RCAWEB_WATCH_RELIST_S", "RCAWEB_WATCH_TIMEOUT_S", "RCAWEB_WATCH_LEASE_S", "RCAWEB_WATCH_SESSION_S", "RCAWEB_WATCH_CHECK_S"):
    if globals()[_name] <= 0:
        raise ImproperlyConfigured(f"{_name}={globals()[_name]}: expected a positive number of seconds")
if RCAWEB_WATCH_APPLY_S < 0:
    raise ImproperlyConfigured(f"RCAWEB_WATCH_APPLY_S={RCAWEB_WATCH_APPLY_S}: expected 0 or more seconds")
RCAWEB_SOURCE_TIMEOUT_S = envint("RCAWEB_SOURCE_TIMEOUT_S", 10)
RCAWEB_RUNAI_ENABLED = envbool("RCAWEB_RUNAI_ENABLED", False)
RCAWEB_RUNAI_TOKEN = envsecret("RCAWEB_RUNAI_TOKEN", "")  # bearer token for the Run:ai REST API
# Basic auth for every cluster's Prometheus, when it needs any (never in the URL: collectors/sources/endpoints.py).
RCAWEB_PROMETHEUS_USERNAME = envsecret("RCAWEB_PROMETHEUS_USERNAME", "")
RCAWEB_PROMETHEUS_PASSWORD = envsecret("RCAWEB_PROMETHEUS_PASSWORD", "")
# What a GPU-hour costs (any currency; unset: no costs shown): the fleet's "allocated but barely used" page
# prices the GPU-hours held and not used with it (web/console/usage.py).
RCAWEB_GPU_HOUR_PRICE: float | None = None
_price = os.environ.get("RCAWEB_GPU_HOUR_PRICE", "").strip()
if _price:
    try:
        RCAWEB_GPU_HOUR_PRICE = float(_price)
    except ValueError:
        RCAWEB_GPU_HOUR_PRICE = math.nan
    if not math.isfinite(RCAWEB_GPU_HOUR_PRICE) or RCAWEB_GPU_HOUR_PRICE < 0:
        raise ImproperlyConfigured(
            f"RCAWEB_GPU_HOUR_PRICE={_price!r}: expected a price per GPU-hour such as 2.50 (0 or more, no currency sign)"
        )

# Incident lifecycle (incidents.lifecycle): an open incident whose alerts have all resolved, and whose subject
# stayed healthy this long, resolves by itself; an alert firing again this soon after the resolution reopens it.
RCAWEB_AUTO_RESOLVE_AFTER = envduration("RCAWEB_AUTO_RESOLVE_AFTER", "15m")
RCAWEB_REOPEN_WINDOW = envduration("RCAWEB_REOPEN_WINDOW", "1h")

# Python's cycle collector in every process (rcaweb/gc_policy.py, applied when the apps are ready; the
# driver hands the same to the simulator's process): "" = its thresholds, with the startup heap frozen; "off" = Python's.
RCAWEB_GC_THRESHOLDS = os.environ.get("RCAWEB_GC_THRESHOLDS", "")
try:
    gc_policy.thresholds(RCAWEB_GC_THRESHOLDS)
except ValueError as _exc:
    raise ImproperlyConfigured(str(_exc)) from None

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("RCAWEB_LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}, "kubernetes": {"level": "WARNING"}},
}

if TESTING:
    # Personas are created per test; PBKDF2 would cost ~0.25 s per user per test.
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
