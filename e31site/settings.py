"""Settings for E31 Network: every value comes from the environment, with defaults that run locally."""

import os
import secrets
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from e31site.env import env_bool, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("E31_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DJANGO_DEBUG", False)


def _secret_key() -> str:
    key = env_str("DJANGO_SECRET_KEY", "")
    if key:
        return key
    # Local default: a random key kept beside the data, never in the code.
    path = VAR_DIR / "secret_key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        key = secrets.token_urlsafe(64)
        path.write_text(key)
        path.chmod(0o600)
        return key


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

SECURE = env_bool("DJANGO_SECURE", False)
SESSION_COOKIE_SECURE = SECURE
CSRF_COOKIE_SECURE = SECURE
SECURE_SSL_REDIRECT = SECURE
SECURE_HSTS_SECONDS = env_int("DJANGO_HSTS_SECONDS", 31536000 if SECURE else 0)
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
    "rest_framework.authtoken",
    "drf_spectacular",
    "django_filters",
    "django_htmx",
    "teams",
    "pool",
    "jobs",
    "accounting",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "e31site.middleware.htmx_login_redirect",
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
    url = env_str("DATABASE_URL", "")
    if url:
        try:
            db = dj_database_url.parse(url, conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 0))
        except ValueError as exc:
            raise ImproperlyConfigured(f"DATABASE_URL: {exc}") from None
        return {"default": db}
    # The local default: SQLite tuned so the web server and the worker can write at once.
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    return {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "e31.sqlite3",
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
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "jobs:list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATICFILES_DIRS = [BASE_DIR / "static"]
E31_STORE_BACKEND = env_str("E31_STORE_BACKEND", "django.core.files.storage.FileSystemStorage")
STORAGES = {
    # The store: staged data, outputs and logs of every job. Any S3-compatible store through
    # django-storages works when nodes are separate machines (see docs/deploy.md).
    "default": {
        "BACKEND": E31_STORE_BACKEND,
        "OPTIONS": {"location": env_str("E31_STORE_DIR", str(VAR_DIR / "store"))}
        if E31_STORE_BACKEND.endswith("FileSystemStorage")
        else {},
    },
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
FILE_UPLOAD_PERMISSIONS = 0o600
FILE_UPLOAD_DIRECTORY_PERMISSIONS = 0o700
FILE_UPLOAD_HANDLERS = ["jobs.uploads.LimitedUploadHandler"]
FILE_UPLOAD_MAX_MEMORY_SIZE = 0  # every upload goes through a temporary file, never memory

REST_FRAMEWORK = {
    # Token first: a request without credentials then gets 401 with `WWW-Authenticate: Token`.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # A list view names its FilterSet (filterset_class); a bad filter value answers 400.
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "e31site.api.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "E31 Network API",
    "VERSION": "1",
    "DESCRIPTION": "Rent compute from a shared pool for unattended batch jobs.",
}

# Celery: Redis is the broker; the database is the truth.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "e31"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A run task holds a worker process for the whole run: one per core, plus room for scheduler passes.
CELERY_WORKER_CONCURRENCY = env_int("E31_WORKER_CONCURRENCY", len(os.sched_getaffinity(0)) + 2, minimum=1)
# Redis redelivers an unacknowledged task after this long: above the longest time limit.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("E31_TIME_LIMIT_MAX_S", 7 * 24 * 3600) + 3600}

# The pool: this machine as a node.
E31_NODE_NAME = env_str("E31_NODE_NAME", "local")
E31_NODE_CPUS = env_str("E31_NODE_CPUS", "")  # cpuset list ("0-3"); empty: the cores this process may use
E31_NODE_MEMORY_MB = env_int("E31_NODE_MEMORY_MB", 0)  # 0: the machine's memory less a reserve
E31_NODE_GPUS = env_list("E31_NODE_GPUS", [])  # device ids
E31_HEARTBEAT_S = env_int("E31_HEARTBEAT_S", 10, minimum=1)
E31_NODE_LOST_S = env_int("E31_NODE_LOST_S", 60, minimum=1)
E31_SCHEDULE_EVERY_S = env_int("E31_SCHEDULE_EVERY_S", 10, minimum=1)
E31_FAIRSHARE_HALF_LIFE_S = env_int("E31_FAIRSHARE_HALF_LIFE_S", 24 * 3600, minimum=1)
E31_MAX_RETRIES = env_int("E31_MAX_RETRIES", 5)  # the most retries a job may ask for
# The periodic passes (Celery beat, one for the whole pool): scheduling, and finding lost nodes.
CELERY_BEAT_SCHEDULE = {
    "schedule": {"task": "jobs.schedule", "schedule": float(E31_SCHEDULE_EVERY_S)},
    "reap": {"task": "jobs.reap", "schedule": float(E31_HEARTBEAT_S)},
}

# Jobs.
E31_SCRATCH_DIR = Path(env_str("E31_SCRATCH_DIR", str(VAR_DIR / "scratch")))
E31_UPLOAD_FILE_MAX_BYTES = env_int("E31_UPLOAD_FILE_MAX_MB", 256) * 1024 * 1024
E31_UPLOAD_JOB_MAX_BYTES = env_int("E31_UPLOAD_JOB_MAX_MB", 1024) * 1024 * 1024
E31_UPLOAD_MAX_FILES = env_int("E31_UPLOAD_MAX_FILES", 100, minimum=1)
E31_OUTPUT_FILE_MAX_BYTES = env_int("E31_OUTPUT_FILE_MAX_MB", 256) * 1024 * 1024
E31_OUTPUT_TOTAL_MAX_BYTES = env_int("E31_OUTPUT_TOTAL_MAX_MB", 1024) * 1024 * 1024
E31_OUTPUT_MAX_FILES = env_int("E31_OUTPUT_MAX_FILES", 1000, minimum=1)
E31_LOG_MAX_BYTES = env_int("E31_LOG_MAX_KB", 8192) * 1024
E31_TIME_LIMIT_MAX_S = env_int("E31_TIME_LIMIT_MAX_S", 7 * 24 * 3600, minimum=1)

# The sandbox: Docker Engine through the docker SDK.
E31_SANDBOX = env_str("E31_SANDBOX", "docker")
E31_SANDBOX_NAMESPACE = env_str("E31_SANDBOX_NAMESPACE", "e31")  # label kept on every container
E31_JOB_UID = env_int("E31_JOB_UID", 10001, minimum=1)
E31_PIDS_LIMIT = env_int("E31_PIDS_LIMIT", 256, minimum=8)
E31_TMPFS_MB = env_int("E31_TMPFS_MB", 64, minimum=1)
E31_CGROUP_ROOT = env_str("E31_CGROUP_ROOT", "/sys/fs/cgroup")

# Accounting: the rate card (cost per held unit-hour).
E31_RATE_CORE_HOUR = env_str("E31_RATE_CORE_HOUR", "0.04")
E31_RATE_GB_HOUR = env_str("E31_RATE_GB_HOUR", "0.005")
E31_RATE_GPU_HOUR = env_str("E31_RATE_GPU_HOUR", "0.90")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("E31_LOG_LEVEL", "INFO")},
}
