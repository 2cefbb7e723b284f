"""Settings: every value from the environment through e31site.envvars, with defaults that run locally."""

import os
import secrets
from datetime import timedelta
from pathlib import Path

from boto3.s3.transfer import TransferConfig
from csp.constants import NONE, SELF

from e31site.envvars import read

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = read("E31_VAR_DIR", BASE_DIR / "var")


def _private(path: Path, mode: int) -> None:
    """The mode, when `path` exists and is ours: a folder someone else made is left alone."""
    try:
        if path.stat().st_uid == os.geteuid():
            path.chmod(mode)
    except FileNotFoundError:
        pass


# VAR_DIR holds the local database, secret key and store: only its owner may enter, whatever the umask.
VAR_DIR.mkdir(parents=True, exist_ok=True, mode=0o700)
_private(VAR_DIR, 0o700)

DEBUG = read("DJANGO_DEBUG")


def _secret_key() -> str:
    key = read("DJANGO_SECRET_KEY")
    if key:
        return key
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
SESSION_ENGINE = "e31site.sessions"  # a malformed cookie is no session, not a 500
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
    "schedules",
    "notify",
    "webhooks",
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
    # Before the CSRF check reads a form's body: an oversized submission is 413 from its Content-Length.
    "e31site.middleware.declared_upload_limit",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "e31site.middleware.htmx_login_redirect",
    # Innermost, so it sees every view's exception: a database or store that is away is a 503, not a 500.
    "e31site.middleware.ServiceUnavailable",
    "e31site.middleware.team_time_zone",  # inside it: reading the person's session needs the database
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
        # Health checks replace a kept connection the server dropped; prepared statements are opt-in (docs/deploy.md).
        options = dict(url_config.get("OPTIONS", {}))
        prepare_threshold = read("DATABASE_PREPARE_THRESHOLD")
        if prepare_threshold and url_config["ENGINE"] == "django.db.backends.postgresql":
            options.update(server_side_binding=True, prepare_threshold=prepare_threshold)
        config = {**url_config, "CONN_MAX_AGE": conn_max_age, "CONN_HEALTH_CHECKS": True, "OPTIONS": options}
        return {"default": config}
    # SQLite tuned so the web server and the worker write at once; 0600 before SQLite opens it (it holds
    # every account), and SQLite gives its -wal and -shm files the same mode.
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
# django-axes locks out an account-and-address pair: an address alone would lock out a whole office,
# an account alone could be locked out by anyone.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_FAILURE_LIMIT = read("E31_LOGIN_FAILURE_LIMIT")
AXES_COOLOFF_TIME = timedelta(minutes=read("E31_LOGIN_COOLOFF_MIN"))
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False  # no banner on every manage.py command
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
# X-Forwarded-For is trusted only behind E31_TRUSTED_PROXIES proxies: anyone can send that header.
E31_TRUSTED_PROXIES = read("E31_TRUSTED_PROXIES")
if E31_TRUSTED_PROXIES:
    AXES_IPWARE_PROXY_COUNT = E31_TRUSTED_PROXIES
    AXES_IPWARE_META_PRECEDENCE_ORDER = ("HTTP_X_FORWARDED_FOR", "REMOTE_ADDR")
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard:review"
LOGOUT_REDIRECT_URL = "login"

# Read by e31site/gunicorn_conf.py.
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
    # The store of every job's data, outputs and logs; a backend other than files takes E31_STORE_OPTIONS.
    "default": {
        "BACKEND": E31_STORE_BACKEND,
        "OPTIONS": {"location": str(E31_STORE_DIR)}
        if E31_STORE_BACKEND.endswith("FileSystemStorage")
        else E31_STORE_OPTIONS,
    },
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
E31_STORE_PART_BYTES = read("E31_STORE_MULTIPART_MB") * 1024 * 1024
# S3 (django-storages reads these): a file over one part goes up in parts, at most four of them in memory;
# a stored file the backend itself reads whole (a log, a reused data file) spills to disk past one part.
AWS_S3_TRANSFER_CONFIG = TransferConfig(
    multipart_threshold=E31_STORE_PART_BYTES, multipart_chunksize=E31_STORE_PART_BYTES, max_concurrency=4
)
AWS_S3_TRANSFER_CONFIG.max_in_memory_upload_chunks = 4
AWS_S3_MAX_MEMORY_SIZE = E31_STORE_PART_BYTES
E31_PRESIGN_OVER_BYTES = read("E31_PRESIGN_OVER_MB") * 1024 * 1024
E31_PRESIGN_EXPIRY_S = read("E31_PRESIGN_EXPIRY_S")
FILE_UPLOAD_PERMISSIONS = 0o600
FILE_UPLOAD_DIRECTORY_PERMISSIONS = 0o700
FILE_UPLOAD_HANDLERS = ["jobs.submit.uploads.LimitedUploadHandler"]
FILE_UPLOAD_MAX_MEMORY_SIZE = 0  # uploads go through a temporary file, so none is held in memory

# In Redis, so every web server shares the throttling counters.
CACHES = {
    "default": {
        "BACKEND": "core.cache.SharedClientRedisCache",
        "LOCATION": read("E31_CACHE_URL") or read("CELERY_BROKER_URL"),
        "KEY_PREFIX": "e31",
        # Every page reads it (teams.access.zones_version): a Redis that stops answering fails a read in a
        # second, which the callers take as the cache being away, instead of holding a web worker for minutes.
        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
    }
}
E31_API_THROTTLE_RATES = {
    "user": read("E31_API_RATE_USER"),
    "anon": read("E31_API_RATE_ANON"),
    "failed_token": read("E31_API_RATE_FAILED_TOKEN"),
}
E31_API_FAILED_TOKEN_LOCKOUT_MIN = read("E31_API_FAILED_TOKEN_LOCKOUT_MIN")
REST_FRAMEWORK = {
    # Token first, so a request without credentials gets 401 with `WWW-Authenticate: Token`.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "teams.tokens.HashedTokenAuthentication",
        "teams.tokens.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_THROTTLE_CLASSES": ["e31site.api.AnonRateThrottle", "e31site.api.UserRateThrottle"],
    "NUM_PROXIES": E31_TRUSTED_PROXIES,  # 0: REMOTE_ADDR; None would trust any X-Forwarded-For
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # core.parsers answers a JSON body nested too deeply as 400.
    "DEFAULT_PARSER_CLASSES": [
        "core.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    # Its count stops at a cap: an exact count scans every matching row.
    "DEFAULT_PAGINATION_CLASS": "core.pagination.CappedCountPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "e31site.api.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "E31 Network API",
    "VERSION": "1",
    "DESCRIPTION": "Rent compute from a shared pool for unattended batch jobs.",
    # Swagger UI's files are this site's static files, never a CDN's.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "e31site.api.document_errors"],
    # The outcomes are one enum wherever a field takes them (a job's outcome, the outcomes mailed).
    "ENUM_NAME_OVERRIDES": {
        "OutcomeEnum": "core.outcomes.Outcome.choices",
        "ScheduleRunStatusEnum": "schedules.models.RunStatus.choices",
        # A submission's and a resubmission's (their schema is the form's: values alone), named as before the second.
        "JobSubmissionIsolationEnum": "jobs.models.Isolation.values",
    },
}

# Only the site's own scripts, styles and images, nothing inline, no framing: injected markup cannot run.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
    }
}

# Redis only nudges; the database is the truth.
CELERY_BROKER_URL = read("CELERY_BROKER_URL")
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Two planes (docs/deploy.md, "Two planes"): a node's worker consumes only its node's queue, its runs;
# the platform's work goes by kind to a queue of its own, consumed by platform workers (`celery -A e31site worker
# --platform KIND`), so that no run waits behind platform work, nor one kind of it behind another.
E31_PLATFORM_TASKS = {
    # Only what starts jobs and is short: a long pass of another kind here would keep jobs from starting.
    "scheduler": ["jobs.schedule", "jobs.windows", "worker.reap"],
    "isolation": ["isolation.probe_pool", "isolation.judge"],
    "webhooks": ["webhooks.deliver"],
    "mail": ["notify.send", "notify.digests"],
    "schedules": ["schedules.due"],
    "upkeep": ["jobs.retention", "accounting.verify_ledger"],
}
E31_PLATFORM_QUEUES = {kind: f"platform.{kind}" for kind in E31_PLATFORM_TASKS}
CELERY_TASK_ROUTES = {
    task: {"queue": E31_PLATFORM_QUEUES[kind]} for kind, tasks in E31_PLATFORM_TASKS.items() for task in tasks
}
# A task no route names still runs on the platform's plane, never on a node (runs name their node's queue).
CELERY_TASK_DEFAULT_QUEUE = E31_PLATFORM_QUEUES["upkeep"]
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker waits out a broker outage and keeps its runs going: Celery would give up, or cancel them.
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
# A run holds a node's worker process throughout: one per core it lends. A platform worker's own comes from its
# command line (`-c`).
CELERY_WORKER_CONCURRENCY = read("E31_WORKER_CONCURRENCY", len(set(read("E31_NODE_CPUS") or os.sched_getaffinity(0))))
# Above the longest time limit, so Redis never redelivers a run still going.
E31_TIME_LIMIT_MAX_S = read("E31_TIME_LIMIT_MAX_S")
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": E31_TIME_LIMIT_MAX_S + 3600}

E31_NODE_NAME = read("E31_NODE_NAME")
E31_NODE_CPUS = read("E31_NODE_CPUS")
E31_NODE_MEMORY_MB = read("E31_NODE_MEMORY_MB")
E31_NODE_GPUS = read("E31_NODE_GPUS")
E31_NODE_FEATURES = read("E31_NODE_FEATURES")
E31_HEARTBEAT_S = read("E31_HEARTBEAT_S")
E31_NODE_LOST_S = read("E31_NODE_LOST_S")
E31_RESEND_AFTER_S = read("E31_RESEND_AFTER_S")
E31_SCHEDULE_EVERY_S = read("E31_SCHEDULE_EVERY_S")
E31_FAIRSHARE_HALF_LIFE_S = read("E31_FAIRSHARE_HALF_LIFE_S")
E31_FAIRSHARE_MAX_WAIT_S = read("E31_FAIRSHARE_MAX_WAIT_S")
E31_MAX_RETRIES = read("E31_MAX_RETRIES")
E31_ARRAY_MAX_TASKS = read("E31_ARRAY_MAX_TASKS")
E31_RETRY_DELAY_MAX_S = read("E31_RETRY_DELAY_MAX_S")

E31_SCRATCH_DIR = read("E31_SCRATCH_DIR", VAR_DIR / "scratch")
E31_UPLOAD_FILE_MAX_BYTES = read("E31_UPLOAD_FILE_MAX_MB") * 1024 * 1024
E31_UPLOAD_JOB_MAX_BYTES = read("E31_UPLOAD_JOB_MAX_MB") * 1024 * 1024
E31_UPLOAD_MAX_FILES = read("E31_UPLOAD_MAX_FILES")
DATA_UPLOAD_MAX_NUMBER_FILES = E31_UPLOAD_MAX_FILES
E31_OUTPUT_FILE_MAX_BYTES = read("E31_OUTPUT_FILE_MAX_MB") * 1024 * 1024
E31_OUTPUT_TOTAL_MAX_BYTES = read("E31_OUTPUT_TOTAL_MAX_MB") * 1024 * 1024
E31_OUTPUT_MAX_FILES = read("E31_OUTPUT_MAX_FILES")
E31_LOG_MAX_BYTES = read("E31_LOG_MAX_KB") * 1024
E31_TEAM_STORE_QUOTA_BYTES = read("E31_TEAM_STORE_QUOTA_MB") * 1024 * 1024
E31_SCRATCH_MIN_FREE_MB = read("E31_SCRATCH_MIN_FREE_MB")

E31_SANDBOX_NAMESPACE = read("E31_SANDBOX_NAMESPACE")
E31_JOB_UID_BASE = read("E31_JOB_UID_BASE")
E31_JOB_UID_COUNT = read("E31_JOB_UID_COUNT")
E31_RUNTIME = read("E31_RUNTIME")
E31_STRONG_RUNTIME = read("E31_STRONG_RUNTIME")
E31_PROBE_ON_START = read("E31_PROBE_ON_START")
E31_PROVE_BEFORE_JOBS = read("E31_PROVE_BEFORE_JOBS")
E31_PROBE_EVERY_S = read("E31_PROBE_EVERY_S")
E31_PIDS_LIMIT = read("E31_PIDS_LIMIT")
E31_PREEMPT_GRACE_S = read("E31_PREEMPT_GRACE_S")
E31_MAX_PREEMPTIONS = read("E31_MAX_PREEMPTIONS")
E31_TMPFS_MB = read("E31_TMPFS_MB")
E31_CGROUP_ROOT = read("E31_CGROUP_ROOT")
E31_USAGE_SAMPLE_S = read("E31_USAGE_SAMPLE_S")

E31_RATE_CORE_HOUR = read("E31_RATE_CORE_HOUR")
E31_RATE_GB_HOUR = read("E31_RATE_GB_HOUR")
E31_RATE_GPU_HOUR = read("E31_RATE_GPU_HOUR")
E31_CURRENCY = read("E31_CURRENCY")
E31_HOLD_OVERHEAD_S = read("E31_HOLD_OVERHEAD_S")
E31_RETENTION_DAYS = read("E31_RETENTION_DAYS")
E31_METRICS_TOKEN = read("E31_METRICS_TOKEN")
# None: files in VAR_DIR found at first use, so the test settings' later VAR_DIR is the one used.
E31_LEDGER_KEY = read("E31_LEDGER_KEY")
E31_LEDGER_HEADS_FILE = read("E31_LEDGER_HEADS_FILE")
E31_SITE_URL = read("E31_SITE_URL").rstrip("/")
E31_WEBHOOK_ALLOWED_HOSTS = read("E31_WEBHOOK_ALLOWED_HOSTS")
E31_WEBHOOK_IN_FLIGHT = read("E31_WEBHOOK_IN_FLIGHT")
E31_TEAM_MAX_WEBHOOKS = read("E31_TEAM_MAX_WEBHOOKS")
E31_WEBHOOK_REDELIVERIES_PER_MINUTE = read("E31_WEBHOOK_REDELIVERIES_PER_MINUTE")
# Mail, by Django's own names: no EMAIL_HOST, no mail (notify.preferences.mail_is_on).
EMAIL_HOST = read("EMAIL_HOST")
EMAIL_PORT = read("EMAIL_PORT")
EMAIL_HOST_USER = read("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = read("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = read("EMAIL_USE_TLS")
EMAIL_TIMEOUT = 30
DEFAULT_FROM_EMAIL = read("DEFAULT_FROM_EMAIL")
E31_NOTIFY_EVERY_S = read("E31_NOTIFY_EVERY_S")
E31_SCHEDULES_EVERY_S = read("E31_SCHEDULES_EVERY_S")
E31_SCHEDULES_PER_PASS = read("E31_SCHEDULES_PER_PASS")
E31_TEAM_MAX_SCHEDULES = read("E31_TEAM_MAX_SCHEDULES")
E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE = read("E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE")
# Celery beat, one for the whole pool: each periodic task and its interval in seconds.
CELERY_BEAT_SCHEDULE = {
    name: {"task": task, "schedule": float(every)}
    for name, task, every in [
        ("schedule", "jobs.schedule", E31_SCHEDULE_EVERY_S),
        ("reap", "worker.reap", E31_HEARTBEAT_S),
        ("windows", "jobs.windows", E31_HEARTBEAT_S),
        ("isolation-probes", "isolation.probe_pool", E31_PROBE_EVERY_S),
        ("isolation-judge", "isolation.judge", E31_SCHEDULE_EVERY_S),
        ("retention", "jobs.retention", read("E31_RETENTION_EVERY_S")),
        ("verify-ledger", "accounting.verify_ledger", read("E31_VERIFY_LEDGER_EVERY_S")),
        ("schedules", "schedules.due", read("E31_SCHEDULES_EVERY_S")),
        ("mail", "notify.send", E31_NOTIFY_EVERY_S),
        ("digests", "notify.digests", E31_NOTIFY_EVERY_S),
        ("webhooks", "webhooks.deliver", E31_NOTIFY_EVERY_S),
    ]
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": read("E31_LOG_LEVEL")},
}
