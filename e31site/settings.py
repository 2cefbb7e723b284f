"""Settings for E31 Network: every value comes from the environment, with defaults that run locally.

Each variable is listed in e31site/envvars.py (type, default, meaning) and read here once, with
`read`: a bad value stops start-up with ImproperlyConfigured naming the variable.
"""

import os
import secrets
from datetime import timedelta
from pathlib import Path

from csp.constants import NONE, SELF

from e31site.envvars import read

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = read("E31_VAR_DIR", BASE_DIR / "var")


def _private(path: Path, mode: int) -> None:
    """Give `path` the mode, when it exists and is ours (a folder someone else made is left alone)."""
    try:
        if path.stat().st_uid == os.geteuid():
            path.chmod(mode)
    except FileNotFoundError:
        pass


def _private_var_dir() -> None:
    """The local defaults (the database with every token digest, the secret key, the store) live in
    VAR_DIR: only its owner may enter it, so nothing under it is readable by anyone else, whatever the
    umask gave a file. An existing folder made by an older version is closed too."""
    VAR_DIR.mkdir(parents=True, exist_ok=True, mode=0o700)
    _private(VAR_DIR, 0o700)


_private_var_dir()

DEBUG = read("DJANGO_DEBUG")


def _secret_key() -> str:
    key = read("DJANGO_SECRET_KEY")
    if key:
        return key
    # Local default: a random key kept beside the data, never in the code.
    path = VAR_DIR / "secret_key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        key = secrets.token_urlsafe(64)
        path.write_text(key)
        path.chmod(0o600)
        return key


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = read("DJANGO_ALLOWED_HOSTS")
CSRF_TRUSTED_ORIGINS = read("DJANGO_CSRF_TRUSTED_ORIGINS")

SECURE = read("DJANGO_SECURE")
SESSION_COOKIE_SECURE = SECURE
CSRF_COOKIE_SECURE = SECURE
SECURE_SSL_REDIRECT = SECURE
SECURE_HSTS_SECONDS = read("DJANGO_HSTS_SECONDS", 31536000 if SECURE else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE
SECURE_HSTS_PRELOAD = SECURE
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if SECURE else None
X_FRAME_OPTIONS = "DENY"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "django_filters",
    "django_htmx",
    "drf_spectacular_sidecar",
    "axes",
    "csp",
    "teams",
    "pool",
    "jobs",
    "accounting",
    "isolation",
    "worker",
    "jobtemplates",
    "ops",
    "dashboard",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # Before anything reads the body (the CSRF check reads a form's, in process_view): a submission
    # declaring more than a job may upload is answered 413 from its Content-Length alone.
    "e31site.middleware.declared_upload_limit",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "e31site.middleware.htmx_login_redirect",
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks: turns a lockout into its 429 page
]

ROOT_URLCONF = "e31site.urls"
WSGI_APPLICATION = "e31site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


def _databases() -> dict:
    url_config, conn_max_age = read("DATABASE_URL"), read("DATABASE_CONN_MAX_AGE")
    if url_config:
        # Health checks: a connection kept between requests (DATABASE_CONN_MAX_AGE) that the server
        # dropped meanwhile is replaced before its first use, not failed on.
        # Opt-in (docs/deploy.md): parameters bound by the server, and a statement run
        # DATABASE_PREPARE_THRESHOLD times on a connection prepared there, so that PostgreSQL may keep
        # a generic plan for it instead of planning it at every request.
        options = dict(url_config.get("OPTIONS", {}))
        prepare_threshold = read("DATABASE_PREPARE_THRESHOLD")
        if prepare_threshold and url_config["ENGINE"] == "django.db.backends.postgresql":
            options.update(server_side_binding=True, prepare_threshold=prepare_threshold)
        config = {**url_config, "CONN_MAX_AGE": conn_max_age, "CONN_HEALTH_CHECKS": True, "OPTIONS": options}
        return {"default": config}
    # The local default: SQLite tuned so the web server and the worker can write at once. The file holds
    # every account, so it is made 0600 before SQLite opens it; SQLite gives its -wal and -shm files the
    # database file's mode, and files left readable by an older version are closed here too.
    path = VAR_DIR / "e31.sqlite3"
    path.touch(mode=0o600)
    for private in (path, path.with_name(f"{path.name}-wal"), path.with_name(f"{path.name}-shm")):
        _private(private, 0o600)
    return {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": path,
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=30000;",
            },
        }
    }


DATABASES = _databases()
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Logins: django-axes locks out an account from one address after E31_LOGIN_FAILURE_LIMIT failures, for
# E31_LOGIN_COOLOFF_MIN minutes. Never an address alone: a whole office behind one address is not locked
# out by one person guessing; nor an account alone, which anyone could lock out. Operators lift a lockout
# in the admin (Axes: access attempts) or with `manage.py axes_reset_username USERNAME`.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_FAILURE_LIMIT = read("E31_LOGIN_FAILURE_LIMIT")
AXES_COOLOFF_TIME = timedelta(minutes=read("E31_LOGIN_COOLOFF_MIN"))
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False  # no banner on every manage.py command; attempts are still logged
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
# The client's address: REMOTE_ADDR, or the address E31_TRUSTED_PROXIES reverse proxies put in
# X-Forwarded-For (never trusted when there is no proxy: anyone can send that header).
E31_TRUSTED_PROXIES = read("E31_TRUSTED_PROXIES")
if E31_TRUSTED_PROXIES:
    AXES_IPWARE_PROXY_COUNT = E31_TRUSTED_PROXIES
    AXES_IPWARE_META_PRECEDENCE_ORDER = ("HTTP_X_FORWARDED_FOR", "REMOTE_ADDR")
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard:review"
LOGOUT_REDIRECT_URL = "login"

# The web server: gunicorn's threads per process, and how long a client may stall a read or a write of
# its connection (e31site/gunicorn_conf.py reads both; docs/deploy.md, "The web server").
E31_WEB_THREADS = read("E31_WEB_THREADS")
E31_WEB_CLIENT_TIMEOUT_S = read("E31_WEB_CLIENT_TIMEOUT_S")

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATICFILES_DIRS = [BASE_DIR / "static"]
E31_STORE_BACKEND = read("E31_STORE_BACKEND")
E31_STORE_DIR = read("E31_STORE_DIR", VAR_DIR / "store")
E31_STORE_OPTIONS = read("E31_STORE_OPTIONS")
STORAGES = {
    # The store: staged data, outputs and logs of every job. Another backend (an S3-compatible
    # store through django-storages, when nodes are separate machines) takes E31_STORE_OPTIONS.
    "default": {
        "BACKEND": E31_STORE_BACKEND,
        "OPTIONS": {"location": str(E31_STORE_DIR)}
        if E31_STORE_BACKEND.endswith("FileSystemStorage")
        else E31_STORE_OPTIONS,
    },
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
FILE_UPLOAD_PERMISSIONS = 0o600
FILE_UPLOAD_DIRECTORY_PERMISSIONS = 0o700
FILE_UPLOAD_HANDLERS = ["jobs.uploads.LimitedUploadHandler"]
FILE_UPLOAD_MAX_MEMORY_SIZE = 0  # every upload goes through a temporary file, never memory

# Throttling counters are shared by every web server: in Redis (the broker's, unless E31_CACHE_URL).
CACHES = {
    "default": {
        "BACKEND": "core.cache.SharedClientRedisCache",
        "LOCATION": read("E31_CACHE_URL") or read("CELERY_BROKER_URL"),
        "KEY_PREFIX": "e31",
    }
}
# Requests per user (signed in) or per address (anonymous); unknown tokens per address and per key prefix.
E31_API_THROTTLE_RATES = {
    "user": read("E31_API_RATE_USER"),
    "anon": read("E31_API_RATE_ANON"),
    "failed_token": read("E31_API_RATE_FAILED_TOKEN"),
}
# Unknown tokens past the `failed_token` rate lock out their address or key prefix for this long (teams.tokens).
E31_API_FAILED_TOKEN_LOCKOUT_MIN = read("E31_API_FAILED_TOKEN_LOCKOUT_MIN")
REST_FRAMEWORK = {
    # Token first: a request without credentials then gets 401 with `WWW-Authenticate: Token`.
    # Keys are stored hashed (teams.models.ApiToken), never as DRF's authtoken stores them.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "teams.tokens.HashedTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_THROTTLE_CLASSES": ["e31site.api.AnonRateThrottle", "e31site.api.UserRateThrottle"],
    "NUM_PROXIES": E31_TRUSTED_PROXIES,  # 0: REMOTE_ADDR; None would trust any X-Forwarded-For
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # DRF's parsers, with its JSON one answering a body nested too deeply as 400 (core.parsers).
    "DEFAULT_PARSER_CLASSES": [
        "core.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    # A list view names its FilterSet (filterset_class); a bad filter value answers 400.
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    # Numbered pages whose count stops at 10,000 (core.pagination): an exact count scanned every row.
    "DEFAULT_PAGINATION_CLASS": "core.pagination.CappedCountPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "e31site.api.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "E31 Network API",
    "VERSION": "1",
    "DESCRIPTION": "Rent compute from a shared pool for unattended batch jobs.",
    # Swagger UI's files come from drf-spectacular-sidecar (static files of this site), never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # The error answers every endpoint may give, documented in one place (e31site.api.document_errors).
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "e31site.api.document_errors"],
}

# The pages allow only the site's own scripts, styles, images and fonts: no inline script, style or
# event-handler attribute (htmx is vendored in static/, and its inline indicator style is turned off in
# base.html), no framing, forms posted only here.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
    }
}

# Celery: Redis is the broker; the database is the truth.
CELERY_BROKER_URL = read("CELERY_BROKER_URL")
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "e31"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker waits for a broker that is away however long it takes (Celery gives up after 100 tries),
# and its runs go on meanwhile: Celery 6 would cancel the running late-acknowledged tasks by default.
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
# A run task holds a worker process for the whole run: one per core, plus room for scheduler passes.
CELERY_WORKER_CONCURRENCY = read("E31_WORKER_CONCURRENCY", len(os.sched_getaffinity(0)) + 2)
# Redis redelivers an unacknowledged task after this long: above the longest time limit.
E31_TIME_LIMIT_MAX_S = read("E31_TIME_LIMIT_MAX_S")
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": E31_TIME_LIMIT_MAX_S + 3600}

# The pool: this machine as a node.
E31_NODE_NAME = read("E31_NODE_NAME")
E31_NODE_CPUS = read("E31_NODE_CPUS")  # list[int] from a cpuset list ("0-3,6"); None: the cores this process may use
E31_NODE_MEMORY_MB = read("E31_NODE_MEMORY_MB")  # 0: the machine's memory less a reserve
E31_NODE_GPUS = read("E31_NODE_GPUS")  # device ids
E31_HEARTBEAT_S = read("E31_HEARTBEAT_S")
E31_NODE_LOST_S = read("E31_NODE_LOST_S")
E31_RESEND_AFTER_S = read("E31_RESEND_AFTER_S")  # the node's watchdog (worker.watchdog)
E31_SCHEDULE_EVERY_S = read("E31_SCHEDULE_EVERY_S")
E31_FAIRSHARE_HALF_LIFE_S = read("E31_FAIRSHARE_HALF_LIFE_S")
E31_MAX_RETRIES = read("E31_MAX_RETRIES")  # the most retries a job may ask for
# The periodic passes (Celery beat, one for the whole pool): scheduling, and finding lost nodes.
CELERY_BEAT_SCHEDULE = {
    "schedule": {"task": "jobs.schedule", "schedule": float(E31_SCHEDULE_EVERY_S)},
    "reap": {"task": "worker.reap", "schedule": float(E31_HEARTBEAT_S)},
}

# Jobs.
E31_SCRATCH_DIR = read("E31_SCRATCH_DIR", VAR_DIR / "scratch")
E31_UPLOAD_FILE_MAX_BYTES = read("E31_UPLOAD_FILE_MAX_MB") * 1024 * 1024
E31_UPLOAD_JOB_MAX_BYTES = read("E31_UPLOAD_JOB_MAX_MB") * 1024 * 1024
E31_UPLOAD_MAX_FILES = read("E31_UPLOAD_MAX_FILES")
DATA_UPLOAD_MAX_NUMBER_FILES = E31_UPLOAD_MAX_FILES  # Django's own count while parsing (jobs.uploads)
E31_OUTPUT_FILE_MAX_BYTES = read("E31_OUTPUT_FILE_MAX_MB") * 1024 * 1024
E31_OUTPUT_TOTAL_MAX_BYTES = read("E31_OUTPUT_TOTAL_MAX_MB") * 1024 * 1024
E31_OUTPUT_MAX_FILES = read("E31_OUTPUT_MAX_FILES")
E31_LOG_MAX_BYTES = read("E31_LOG_MAX_KB") * 1024
# Storage quotas: a team's default store quota (operators set others, accounting.store_quotas) and the
# scratch space under which a node takes no job.
E31_TEAM_STORE_QUOTA_BYTES = read("E31_TEAM_STORE_QUOTA_MB") * 1024 * 1024
E31_SCRATCH_MIN_FREE_MB = read("E31_SCRATCH_MIN_FREE_MB")

# The sandbox: Docker Engine through the docker SDK.
E31_SANDBOX_NAMESPACE = read("E31_SANDBOX_NAMESPACE")  # label kept on every container
E31_JOB_UID_BASE = read("E31_JOB_UID_BASE")
E31_JOB_UID_COUNT = read("E31_JOB_UID_COUNT")
E31_RUNTIME = read("E31_RUNTIME")
E31_STRONG_RUNTIME = read("E31_STRONG_RUNTIME")
E31_PROBE_ON_START = read("E31_PROBE_ON_START")
E31_PROBE_EVERY_S = read("E31_PROBE_EVERY_S")
# The isolation probes (docs/isolation.md): a round on every active node under each runtime, daily (and
# when a node's worker starts), and the judging of the rounds whose probe jobs were all released.
CELERY_BEAT_SCHEDULE["isolation-probes"] = {"task": "isolation.probe_pool", "schedule": float(E31_PROBE_EVERY_S)}
CELERY_BEAT_SCHEDULE["isolation-judge"] = {"task": "isolation.judge", "schedule": float(E31_SCHEDULE_EVERY_S)}
E31_PIDS_LIMIT = read("E31_PIDS_LIMIT")
E31_TMPFS_MB = read("E31_TMPFS_MB")
E31_CGROUP_ROOT = read("E31_CGROUP_ROOT")  # a Path

# Accounting: the rate card (cost per held unit-hour), Decimals.
E31_RATE_CORE_HOUR = read("E31_RATE_CORE_HOUR")
E31_RATE_GB_HOUR = read("E31_RATE_GB_HOUR")
E31_RATE_GPU_HOUR = read("E31_RATE_GPU_HOUR")
E31_CURRENCY = read("E31_CURRENCY")
E31_HOLD_OVERHEAD_S = read("E31_HOLD_OVERHEAD_S")  # a hold is metered at most its time limit and this
E31_RETENTION_DAYS = read("E31_RETENTION_DAYS")
E31_METRICS_TOKEN = read("E31_METRICS_TOKEN")
# Retention and the ledger's periodic check (the last result is on /metrics).
CELERY_BEAT_SCHEDULE["retention"] = {"task": "jobs.retention", "schedule": float(read("E31_RETENTION_EVERY_S"))}
CELERY_BEAT_SCHEDULE["verify-ledger"] = {
    "task": "accounting.verify_ledger",
    "schedule": float(read("E31_VERIFY_LEDGER_EVERY_S")),
}
# The ledger's key and this machine's heads file; None: files in VAR_DIR, found when first used
# (accounting.chain, accounting.heads), so a VAR_DIR set after these lines (the test settings) is the one used.
E31_LEDGER_KEY = read("E31_LEDGER_KEY")
E31_LEDGER_HEADS_FILE = read("E31_LEDGER_HEADS_FILE")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": read("E31_LOG_LEVEL")},
}
