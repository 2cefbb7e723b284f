"""Every environment variable the settings read (kind, default, meaning), and `read`, their one parser."""

import copy
import json
import re
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string
from kombu.transport import TRANSPORT_ALIASES

from core.cpusets import parse_cpu_list
from pool.features import parse_features
from webhooks.hosts import parse_entry as parse_allowed_host

# Raw text is cast with env's parsers, never env.str(): that expands a leading "$" as another variable's name.
env = environ.Env()


@dataclass(frozen=True)
class Kind:
    """`name` completes "X must be …" in errors and is the docs' type."""

    name: str
    parse: Callable[[str], Any]  # raises ValueError (or ArithmeticError) on a bad value
    echo: bool = True  # False: errors do not repeat the value (it may hold a password)


def integer(minimum: int) -> Kind:
    def parse(raw: str) -> int:
        value = env.parse_value(raw, int)
        if value < minimum:
            raise ValueError(raw)
        return value

    return Kind(f"an integer ≥ {minimum}", parse)


def _boolean(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(raw)


def _decimal(raw: str) -> Decimal:
    value = env.parse_value(raw, Decimal)
    if not value.is_finite() or value < 0:
        raise ValueError(raw)
    return value


def _list(raw: str) -> list[str]:
    return [item.strip() for item in env.parse_value(raw, list) if item.strip()]


class Named(ValueError):
    """A bad value whose message says which part of it is wrong (an entry of a list): `read` adds it."""


def _hosts(raw: str) -> list[str]:
    """An entry that looks like an address or a network must parse as one, so a typo such as 10.0.0.0/33 stops
    start-up instead of being taken for a name that never matches."""
    entries = _list(raw)
    for entry in entries:
        try:
            parse_allowed_host(entry)
        except ValueError as exc:
            raise Named(str(exc)) from None
    return entries


def _not_empty(parse: Callable[[str], list]) -> Callable[[str], list]:
    """`parse`, refusing a value that lists nothing."""

    def parsed(raw: str) -> list:
        if not (found := parse(raw)):
            raise ValueError(raw)
        return found

    return parsed


def _database(raw: str) -> dict:
    with warnings.catch_warnings():  # django-environ's warning on an unknown scheme shows the password
        warnings.simplefilter("ignore")
        config = env.db_url_config(raw.strip())
    if config.get("ENGINE") not in env.DB_SCHEMES.values():
        scheme, sep, _ = raw.partition("://")
        raise ValueError(f"unknown scheme {scheme!r}" if sep else "no scheme")
    return config


_RATE = re.compile(r"^[1-9][0-9]*/(s|sec|second|m|min|minute|h|hour|d|day)$")


def _request_rate(raw: str) -> str:
    value = raw.strip()
    if not _RATE.match(value):
        raise ValueError(raw)
    return value  # core.ratelimit.Window.parse reads it


def one_of(*choices: str) -> Kind:
    def parse(raw: str) -> str:
        value = raw.strip()
        for choice in choices:
            if value.lower() == choice.lower():
                return choice
        raise ValueError(raw)

    return Kind("one of " + ", ".join(choices), parse)


def _json_object(raw: str) -> dict:
    value = json.loads(raw)  # its error names a position, never the text (it may hold a secret)
    if not isinstance(value, dict):
        raise ValueError(f"a JSON {type(value).__name__}, not an object")
    return value


def _class_path(raw: str) -> str:
    """Imported now, so a typo stops start-up, not the first upload."""
    value = raw.strip()
    try:
        import_string(value)
    except ImportError as exc:
        raise ValueError(str(exc)) from None
    return value


def _broker_url(raw: str) -> str:
    value = raw.strip()
    scheme = urlsplit(value).scheme
    if scheme not in TRANSPORT_ALIASES:
        raise ValueError(value)
    return value


def _secret(raw: str) -> str:
    if len(raw.strip()) < 32:
        raise ValueError("shorter than 32 characters")
    return raw.strip()


TEXT = Kind("text", str)
PATH = Kind("a path", Path)
BOOLEAN = Kind("a boolean (1/0, true/false, yes/no, on/off)", _boolean)
RATE = Kind("a decimal number ≥ 0", _decimal)
LIST = Kind("a comma list", _list)
HOSTS = Kind("a comma list of host names, addresses and CIDRs, each with an optional :port or :low-high", _hosts)
CPUS = Kind("a cpu list such as 0-3,6", _not_empty(parse_cpu_list))
FEATURES = Kind("a comma list of features (letters, digits, '.', '_', '-')", _not_empty(parse_features))
DATABASE = Kind("a database URL", _database, echo=False)
CLASS_PATH = Kind("an importable class path", _class_path, echo=False)
BROKER_URL = Kind("a broker URL such as redis://host:6379/0", _broker_url)
JSON_OBJECT = Kind("a JSON object", _json_object, echo=False)
SECRET = Kind("a secret of at least 32 characters", _secret, echo=False)
PASSWORD = Kind("text", str, echo=False)
REQUEST_RATE = Kind("a rate such as 100/min (per s, min, hour or day)", _request_rate)


@dataclass(frozen=True)
class Var:
    kind: Kind
    default: Any  # None: settings.py passes the default, or None is the value
    meaning: str
    shown: str = ""  # the default as the docs show it, when not the default itself


# fmt: off
VARIABLES: dict[str, Var] = {
    # Django and the web server.
    "DJANGO_SECRET_KEY": Var(TEXT, None, "Django's secret key: set it in production, the same on every web server",
        "a random key kept in `$E31_VAR_DIR/secret_key`"),
    "DJANGO_DEBUG": Var(BOOLEAN, False, "Django's debug pages; never in production"),
    "DJANGO_ALLOWED_HOSTS": Var(LIST, ["127.0.0.1", "localhost"], "host names the site answers to"),
    "DJANGO_CSRF_TRUSTED_ORIGINS": Var(LIST, [], "origins trusted for unsafe requests besides the site's own, with "
        "scheme (`https://e31.example.org`)"),
    "DJANGO_SECURE": Var(BOOLEAN, False, "1 behind TLS: secure cookies, HSTS (with subdomains, preload), SSL "
        "redirect, trust `X-Forwarded-Proto`"),
    "DJANGO_HSTS_SECONDS": Var(integer(0), None, "HSTS max-age", "31536000 with `DJANGO_SECURE=1`, else 0"),
    "DATABASE_URL": Var(DATABASE, None, "the database, e.g. `postgres://user@host:5432/e31`",
        "SQLite at `$E31_VAR_DIR/e31.sqlite3` (WAL, busy timeout 30 s, immediate transactions)"),
    "DATABASE_CONN_MAX_AGE": Var(integer(0), 0, "seconds a connection to `DATABASE_URL` is kept for reuse; 0: "
        "closed after each request"),
    "DATABASE_PREPARE_THRESHOLD": Var(integer(0), 0, "runs of a statement on a PostgreSQL connection before it is "
        "prepared there (server-side binding); 0: never. For web servers with `DATABASE_CONN_MAX_AGE` > 0 only "
        "(docs/deploy.md)"),
    "CELERY_BROKER_URL": Var(BROKER_URL, "redis://127.0.0.1:6379/0", "the Redis broker of the Celery workers"),
    "E31_CACHE_URL": Var(TEXT, None, "the Redis that keeps the API's throttling counters and the pages' zones' "
        "version for every web server", "`CELERY_BROKER_URL`"),
    # Abuse: logins, the API's request rates, the client's address.
    "E31_LOGIN_FAILURE_LIMIT": Var(integer(1), 5, "failed logins of one account from one address before that pair "
        "is locked out"),
    "E31_LOGIN_COOLOFF_MIN": Var(integer(1), 15, "minutes a locked-out account-and-address pair waits"),
    "E31_API_RATE_USER": Var(REQUEST_RATE, "600/min", "API requests of one signed-in person"),
    "E31_API_RATE_ANON": Var(REQUEST_RATE, "60/min", "API requests without credentials, per address"),
    "E31_API_RATE_FAILED_TOKEN": Var(REQUEST_RATE, "30/hour", "unknown API tokens per address, and per key prefix, "
        "before that address or prefix is locked out"),
    "E31_API_FAILED_TOKEN_LOCKOUT_MIN": Var(integer(1), 15, "minutes an address or key prefix past "
        "`E31_API_RATE_FAILED_TOKEN` gets 429 for unknown tokens (valid tokens, sessions and requests without a "
        "token are never locked out)"),
    "E31_TRUSTED_PROXIES": Var(integer(0), 0, "reverse proxies in front of the web servers that append the client's "
        "address to `X-Forwarded-For` (for throttling and lockouts); 0: the connection's address"),
    "E31_LOG_LEVEL": Var(one_of("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"), "INFO", "the root logger's level"),
    # The web server (e31site/gunicorn_conf.py).
    "E31_WEB_THREADS": Var(integer(1), 8, "threads of each web server process (gunicorn's gthread workers): the "
        "requests it serves at once, a download holding one while its client reads"),
    "E31_WEB_CLIENT_TIMEOUT_S": Var(integer(1), 60, "seconds the web server waits on a client that stops sending "
        "its request (headers or body) or stops reading the answer; then the request is answered 400 or the "
        "connection closed"),
    # Files.
    "E31_VAR_DIR": Var(PATH, None, "where the local defaults live", "`var/` in the checkout"),
    "E31_STORE_BACKEND": Var(CLASS_PATH, "django.core.files.storage.FileSystemStorage", "the store's storage class: "
        "staged data and outputs of every job (S3 through django-storages: docs/deploy.md)"),
    "E31_STORE_DIR": Var(PATH, None, "the store's folder, with the file-system backend", "`$E31_VAR_DIR/store`"),
    "E31_STORE_OPTIONS": Var(JSON_OBJECT, {}, "the `OPTIONS` of any other store backend, e.g. django-storages' S3 "
        "`bucket_name`, `endpoint_url`, `access_key`, `secret_key` (see docs/deploy.md)", "`{}`"),
    "E31_STORE_MULTIPART_MB": Var(integer(5), 8, "with an S3 store: a file over this goes up in parts of this "
        "size (multipart), at most 4 parts in memory at once, so no big file is ever held whole"),
    "E31_PRESIGN_OVER_MB": Var(integer(0), 64, "with an S3 store: an output download at least this big is a "
        "redirect to a presigned URL of the store rather than streamed through the web; 0: always streamed"),
    "E31_PRESIGN_EXPIRY_S": Var(integer(1), 300, "seconds a presigned download URL stays valid"),
    "E31_SCRATCH_DIR": Var(PATH, None, "the node's private run folders, on local disk", "`$E31_VAR_DIR/scratch`"),
    # The node and the pool.
    "E31_NODE_NAME": Var(TEXT, "local", "this worker's node, unique in the pool"),
    "E31_NODE_CPUS": Var(CPUS, None, "core ids lent to the pool (`0-3,6`)", "the cores this process may use"),
    "E31_NODE_MEMORY_MB": Var(integer(0), 0, "memory lent to the pool; 0: the machine's memory less 1 GiB (≥ 256)"),
    "E31_NODE_GPUS": Var(LIST, [], "GPU device ids lent to the pool (`0,1`)"),
    "E31_NODE_FEATURES": Var(FEATURES, None, "this node's features, which a job's `constraint` asks for "
        "(`bigmem,nvme,gpu-h100`); set, they replace the node's at each registration",
        "those set in the admin"),
    "E31_HEARTBEAT_S": Var(
        integer(1), 10, "seconds between a node's heartbeats, and between reaper and maintenance-window passes"
    ),
    "E31_NODE_LOST_S": Var(integer(1), 60, "seconds of silence after which a node is lost"),
    "E31_RESEND_AFTER_S": Var(integer(1), 30, "seconds after which a node sends again a run held on it that has not "
        "started or that no process watches (its message was lost), and between two such sends of one run"),
    "E31_SCHEDULE_EVERY_S": Var(integer(1), 10, "seconds between scheduler passes"),
    "E31_FAIRSHARE_HALF_LIFE_S": Var(integer(1), 86400, "half-life of a team's past usage in the queue order"),
    "E31_FAIRSHARE_MAX_WAIT_S": Var(integer(0), 600, "seconds a job waits before it is served in submit order "
        "ahead of the fair-share order within its queue's priority; 0: fair-share only"),
    "E31_WORKER_CONCURRENCY": Var(integer(1), None, "a node's worker processes: a run holds one for its whole run, "
        "and the node runs nothing else (a platform worker takes its own from its `-c`)", "the cores the node lends"),
    # Jobs.
    "E31_MAX_RETRIES": Var(integer(0), 5, "the most `max_retries` a job may ask for"),
    "E31_ARRAY_MAX_TASKS": Var(integer(1), 10000, "the most tasks of one array"),
    "E31_RETRY_DELAY_MAX_S": Var(integer(0), 86400, "the longest `retry_delay_s` a job may ask for"),
    "E31_TIME_LIMIT_MAX_S": Var(integer(1), 604800, "the longest time limit a job may ask for; Redis' visibility "
        "timeout is 1 h above it"),
    "E31_UPLOAD_FILE_MAX_MB": Var(integer(0), 256, "largest data file of a job"),
    "E31_UPLOAD_JOB_MAX_MB": Var(integer(0), 1024, "largest data of a job, all files together"),
    "E31_UPLOAD_MAX_FILES": Var(integer(1), 100, "most data files of a job"),
    "E31_OUTPUT_FILE_MAX_MB": Var(integer(0), 256, "largest output file collected"),
    "E31_OUTPUT_TOTAL_MAX_MB": Var(integer(0), 1024, "largest outputs of a job, all files together; the size of its "
        "`/output` while it runs"),
    "E31_OUTPUT_MAX_FILES": Var(integer(1), 1000, "most output files collected; while the job runs `/output` takes "
        "65 entries more (its folders), no more"),
    "E31_LOG_MAX_KB": Var(integer(0), 8192, "log kept per job; the rest is cut"),
    # Storage quotas (docs/operations.md, "Storage quotas").
    "E31_TEAM_STORE_QUOTA_MB": Var(integer(0), 10240, "what a team may keep in the store (its jobs' staged data and "
        "outputs until retention deletes them) when operators have set it no quota of its own; sparse files count "
        "at their apparent size"),
    "E31_SCRATCH_MIN_FREE_MB": Var(integer(0), 1024, "free space a node keeps on its scratch folder's disk: below "
        "it the node takes no new job (0: no floor)"),
    # The sandbox.
    "E31_SANDBOX_NAMESPACE": Var(TEXT, "e31", "label and cgroup parent of this installation's containers"),
    "E31_JOB_UID_BASE": Var(integer(1), 10001, "the first uid of the range jobs run as when the worker is root "
        "(else as the worker's uid): each run gets its own, base + its first held core"),
    "E31_JOB_UID_COUNT": Var(integer(1), 4096, "the size of that range: at least the cores of the largest node, so "
        "no two runs share one"),
    "E31_RUNTIME": Var(TEXT, "runc", "the container runtime of jobs with isolation=standard (the engine's name)"),
    "E31_STRONG_RUNTIME": Var(TEXT, "runsc", "the container runtime of jobs with isolation=strong: gVisor, "
        "registered with dockerd"),
    "E31_PROBE_ON_START": Var(BOOLEAN, True, "run the isolation probes on a node when its worker starts"),
    "E31_PROVE_BEFORE_JOBS": Var(BOOLEAN, True, "with E31_PROBE_ON_START, a starting node takes no team's job "
        "until its probes pass (`proving`); 0: it takes jobs while they run"),
    "E31_PROBE_EVERY_S": Var(integer(60), 86400, "seconds between two rounds of isolation probes on every node"),
    "E31_PIDS_LIMIT": Var(integer(8), 256, "processes per job"),
    "E31_PREEMPT_GRACE_S": Var(integer(0), 30, "seconds a preempted job has between its SIGTERM and its kill, to "
        "write a checkpoint to /output (docs/operations.md, \"Preemption\")"),
    "E31_MAX_PREEMPTIONS": Var(integer(0), 3, "times one job may be preempted; past them it is not preemptable and "
        "runs to its end (0: no job is ever preempted; docs/operations.md, \"Preemption\")"),
    "E31_TMPFS_MB": Var(integer(1), 64, "size of each job's `/tmp`"),
    "E31_CGROUP_ROOT": Var(PATH, Path("/sys/fs/cgroup"), "where the cgroup file system is mounted"),
    "E31_USAGE_SAMPLE_S": Var(integer(1), 5, "seconds between two samples of a running job's cpu and memory use "
        "(its cgroup, read by its node), shown on its page and in the API as `usage_now`"),
    # Accounting: the rate card, cost per held unit-hour.
    "E31_RATE_CORE_HOUR": Var(RATE, Decimal("0.04"), "cost of a core-hour"),
    "E31_RATE_GB_HOUR": Var(RATE, Decimal("0.005"), "cost of a GiB-hour of memory"),
    "E31_RATE_GPU_HOUR": Var(RATE, Decimal("0.90"), "cost of a GPU-hour"),
    "E31_CURRENCY": Var(one_of("EUR", "USD", "GBP", "CHF", "JPY", "CAD", "AUD", "SEK", "NOK", "DKK"), "EUR", "the "
        "currency of every cost (ISO 4217 code), kept on each record"),
    # The worst case of a job (docs/operations.md, "Money").
    "E31_HOLD_OVERHEAD_S": Var(integer(10), 60, "seconds a hold may be metered beyond its job's time limit (the "
        "run's start, the kill, output collection, the release): part of every job's worst case, and the meter "
        "never counts past it"),
    # Retention (docs/operations.md, "Retention").
    "E31_RETENTION_DAYS": Var(integer(0), 30, "days after its release a job's staged data and outputs are deleted "
        "from the store (a team may have its own); records and the list of outputs (names, sizes, sha256) are kept "
        "for good"),
    "E31_RETENTION_EVERY_S": Var(integer(60), 3600, "seconds between two passes of the retention task"),
    "E31_VERIFY_LEDGER_EVERY_S": Var(integer(60), 86400, "seconds between two verify_ledger runs of Celery beat "
        "(their result is on /metrics)"),
    "E31_METRICS_TOKEN": Var(SECRET, None, "the bearer token `/metrics` asks for (`Authorization: Bearer <token>`)",
        "no token: `/metrics` answers requests from a loopback address only"),
    # Schedules, mail and webhooks (docs/reference/schedules.md, docs/reference/notifications.md).
    "E31_SITE_URL": Var(TEXT, "http://127.0.0.1:8000", "the site's address as people reach it: the links in mails "
        "and webhooks start with it"),
    "E31_SCHEDULES_EVERY_S": Var(integer(1), 15, "seconds between two passes that submit the schedules' due runs"),
    "E31_SCHEDULES_PER_PASS": Var(integer(1), 200, "schedules one pass records at most (each team's in turn); the "
        "others wait for the next passes, their planned times kept"),
    "E31_TEAM_MAX_SCHEDULES": Var(integer(1), 100, "schedules a team may have, paused ones included: one more is "
        "refused (409) naming this setting"),
    "E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE": Var(integer(1), 30, "runs a team's schedules submit with planned times "
        "in one minute; the runs past it are recorded refused, naming this setting"),
    "E31_NOTIFY_EVERY_S": Var(integer(1), 60, "seconds between two passes that send waiting mails and webhook "
        "deliveries, and prepare the morning digests"),
    "EMAIL_HOST": Var(TEXT, "", "the SMTP server mail is sent through; none: mail is off (the pages say so)"),
    "EMAIL_PORT": Var(integer(1), 25, "its port"),
    "EMAIL_HOST_USER": Var(TEXT, "", "the user to log in to it as; none: no login"),
    "EMAIL_HOST_PASSWORD": Var(PASSWORD, "", "that user's password"),
    "EMAIL_USE_TLS": Var(BOOLEAN, False, "1: STARTTLS on the connection"),
    "DEFAULT_FROM_EMAIL": Var(TEXT, "e31@localhost", "the From address of every mail"),
    "E31_WEBHOOK_ALLOWED_HOSTS": Var(HOSTS, [], "hosts and CIDRs a webhook may reach, each with the port or range "
        "it opens (`hooks.example.org:8443,10.8.0.0/16:8000-8099,[2001:db8::1]:9000`; no port: 80 and 443 only), "
        "checked at start-up, when a webhook is made or changed, and after DNS resolution at every attempt and "
        "redirect; none: webhooks are off"),
    "E31_WEBHOOK_IN_FLIGHT": Var(integer(1), 8, "webhook deliveries a pass has in flight at once, each in a thread "
        "of its own with a deadline of 5 s (DNS, connection and the whole answer); never more than one at a time "
        "to one receiver (the address and port a request reaches)"),
    "E31_TEAM_MAX_WEBHOOKS": Var(integer(1), 50, "the most webhooks a team may have; one more is a 400 naming this "
        "setting"),
    "E31_WEBHOOK_REDELIVERIES_PER_MINUTE": Var(integer(1), 60, "the most redeliveries of one webhook's deliveries "
        "in any minute; one more is a 429 with Retry-After naming this setting"),
    # The ledger's key and heads (docs/reference/accounting.md).
    "E31_LEDGER_KEY": Var(SECRET, None, "the key of the records' hash chain (HMAC-SHA256), never in the database: "
        "set it in production, the same on every machine (web servers and workers all write records), and back it "
        "up: a ledger cannot be verified without it",
        "a random key kept in `$E31_VAR_DIR/ledger_key` (0600), made on first use"),
    "E31_LEDGER_HEADS_FILE": Var(PATH, None, "this machine's append-only log of the ledger heads it wrote "
        "(`sequence hash time`), checked by `manage.py verify_ledger`", "`$E31_VAR_DIR/ledger-heads.log`"),
}
# fmt: on

READ: set[str] = set()  # the names read so far: the test checks settings.py reads every one


def read(name: str, default: Any = None) -> Any:
    """The value of `name`, parsed; unset or empty: `default` if given, else the listed one."""
    var = VARIABLES[name]  # a KeyError here: list the variable first
    READ.add(name)
    raw = env.ENVIRON.get(name, "")
    if not raw.strip():
        return copy.copy(var.default if default is None else default)  # a list default stays unshared
    try:
        return var.kind.parse(raw)
    except (ValueError, ArithmeticError) as exc:
        got = f", got {raw!r}" if var.kind.echo else f" ({exc})"
        if isinstance(exc, Named) and var.kind.echo:
            got += f": {exc}"
        raise ImproperlyConfigured(f"{name} must be {var.kind.name}{got}") from None


DOCS = Path(__file__).resolve().parent.parent / "docs" / "operations.md"
TABLE_START = "<!-- settings table: generated from e31site/envvars.py by `python -m e31site.envvars` -->"
TABLE_END = "<!-- end of settings table -->"


def _shown(var: Var) -> str:
    if var.shown:
        return var.shown
    if isinstance(var.default, bool):
        return f"`{int(var.default)}`"
    if isinstance(var.default, list):
        return f"`{','.join(var.default)}`" if var.default else "none"
    return f"`{var.default}`"


def table() -> str:
    rows = ["| variable | type | default | meaning |", "|---|---|---|---|"]
    for name, var in VARIABLES.items():
        rows.append(f"| `{name}` | {var.kind.name} | {_shown(var)} | {var.meaning} |")
    return "\n".join(rows)


def with_table(text: str) -> str:
    head, start, rest = text.partition(TABLE_START)
    _, end, tail = rest.partition(TABLE_END)
    if not (start and end):
        raise ValueError(f"{DOCS.name} lacks the settings table markers")
    return f"{head}{TABLE_START}\n{table()}\n{TABLE_END}{tail}"


if __name__ == "__main__":
    DOCS.write_text(with_table(DOCS.read_text()))
    print(f"wrote the settings table of {DOCS}", file=sys.stderr)
