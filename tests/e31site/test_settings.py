"""Settings from the environment: one list of variables, the docs' table made from it, bad values stop start-up."""

import json
import os
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from e31site import envvars

ROOT = Path(__file__).resolve().parents[2]

# Loads the production settings module in a fresh process, as the web server or a worker would.
SHOW = """
import json, os, django
django.setup()
from django.conf import settings as s
print(json.dumps({name: getattr(s, name) for name in os.environ["SHOW"].split()}, default=repr))
"""


def start(tmp_path, **variables) -> subprocess.CompletedProcess:
    """Start Django with e31site.settings and only `variables` set (besides a scratch E31_VAR_DIR)."""
    env = {
        "PATH": os.environ["PATH"],
        "DJANGO_SETTINGS_MODULE": "e31site.settings",
        "E31_VAR_DIR": str(tmp_path),
        "SHOW": "DEBUG",
        **variables,
    }
    return subprocess.run(
        [sys.executable, "-c", SHOW], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )  # fmt: skip


def shown(tmp_path, names: str, **variables) -> dict:
    result = start(tmp_path, SHOW=names, **variables)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


# --- the docs and the code agree -----------------------------------------------------------------


def test_the_docs_table_is_the_one_generated_from_the_variables():
    text = envvars.DOCS.read_text()
    documented = re.findall(r"^\| `([A-Z0-9_]+)` \|", text, flags=re.MULTILINE)

    assert sorted(documented) == sorted(envvars.VARIABLES), "docs/operations.md lists other variables than the code"
    assert envvars.with_table(text) == text, "the settings table is stale: run `python -m e31site.envvars`"


def test_settings_read_every_listed_variable_and_nothing_else():
    assert settings.SECRET_KEY  # the settings are loaded

    assert set(envvars.VARIABLES) == envvars.READ
    source = (ROOT / "e31site" / "settings.py").read_text()
    assert "os.environ" not in source and "getenv" not in source, "settings.py must read through envvars.read"


def test_computed_defaults_are_the_documented_ones(tmp_path):
    values = shown(
        tmp_path,
        "SECURE_HSTS_SECONDS CELERY_WORKER_CONCURRENCY E31_NODE_CPUS E31_NODE_GPUS E31_STORE_DIR E31_SCRATCH_DIR "
        "DATABASES E31_RATE_CORE_HOUR E31_CGROUP_ROOT ALLOWED_HOSTS",
    )

    assert values["SECURE_HSTS_SECONDS"] == 0
    assert values["CELERY_WORKER_CONCURRENCY"] == len(os.sched_getaffinity(0))  # a process per core the node lends
    assert values["E31_NODE_CPUS"] is None and values["E31_NODE_GPUS"] == []
    assert values["E31_STORE_DIR"] == repr(tmp_path / "store")
    assert values["E31_SCRATCH_DIR"] == repr(tmp_path / "scratch")
    assert values["DATABASES"]["default"]["NAME"] == repr(tmp_path / "e31.sqlite3")
    assert values["E31_RATE_CORE_HOUR"] == repr(Decimal("0.04"))
    assert values["E31_CGROUP_ROOT"] == repr(Path("/sys/fs/cgroup"))
    assert values["ALLOWED_HOSTS"] == ["127.0.0.1", "localhost"]
    assert (tmp_path / "secret_key").read_text().strip()
    assert shown(tmp_path, "SECURE_HSTS_SECONDS", DJANGO_SECURE="1")["SECURE_HSTS_SECONDS"] == 31536000


def test_a_nodes_worker_has_a_process_per_core_it_lends(tmp_path):
    assert shown(tmp_path, "CELERY_WORKER_CONCURRENCY", E31_NODE_CPUS="4-6, 1")["CELERY_WORKER_CONCURRENCY"] == 4
    assert shown(tmp_path, "CELERY_WORKER_CONCURRENCY", E31_NODE_CPUS="0", E31_WORKER_CONCURRENCY="3") == {
        "CELERY_WORKER_CONCURRENCY": 3
    }


def test_values_are_typed_once_at_start_up(tmp_path):
    values = shown(
        tmp_path,
        "E31_NODE_CPUS E31_NODE_GPUS E31_RATE_GB_HOUR DEBUG E31_HEARTBEAT_S DATABASES ALLOWED_HOSTS",
        E31_NODE_CPUS="4-6, 1",
        E31_NODE_GPUS="0, 1,",
        E31_RATE_GB_HOUR="0.25",
        DJANGO_DEBUG="yes",
        E31_HEARTBEAT_S="3",
        DATABASE_URL="postgres://e31:pw@db.internal:5432/e31",
        DATABASE_CONN_MAX_AGE="60",
        DJANGO_ALLOWED_HOSTS="",  # empty: the default
    )

    assert values["E31_NODE_CPUS"] == [1, 4, 5, 6]
    assert values["E31_NODE_GPUS"] == ["0", "1"]
    assert values["E31_RATE_GB_HOUR"] == repr(Decimal("0.25"))
    assert (values["DEBUG"], values["E31_HEARTBEAT_S"]) == (True, 3)
    db = values["DATABASES"]["default"]
    assert (db["ENGINE"], db["HOST"], db["NAME"], db["CONN_MAX_AGE"]) == (
        "django.db.backends.postgresql",
        "db.internal",
        "e31",
        60,
    )
    assert db["OPTIONS"] == {}  # by default Django's client-side binding, nothing prepared
    assert values["ALLOWED_HOSTS"] == ["127.0.0.1", "localhost"]


@pytest.mark.parametrize(
    ("url", "threshold", "options"),
    [
        ("postgres://e31@db.internal:5432/e31", "5", {"server_side_binding": True, "prepare_threshold": 5}),
        ("postgres://e31@db.internal:5432/e31", "0", {}),  # never prepared: Django's client-side binding
        ("sqlite:////nonexistent/e31.sqlite3", "5", {}),  # PostgreSQL's options only
    ],
)
def test_statements_are_prepared_on_postgresql_only_when_asked(tmp_path, url, threshold, options):
    values = shown(tmp_path, "DATABASES", DATABASE_URL=url, DATABASE_PREPARE_THRESHOLD=threshold)

    assert values["DATABASES"]["default"]["OPTIONS"] == options


# --- a bad value stops start-up, naming the variable --------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("E31_HEARTBEAT_S", "abc", "E31_HEARTBEAT_S must be an integer ≥ 1, got 'abc'"),
        ("E31_HEARTBEAT_S", "0", "E31_HEARTBEAT_S must be an integer ≥ 1, got '0'"),
        ("E31_NODE_MEMORY_MB", "4G", "E31_NODE_MEMORY_MB must be an integer ≥ 0, got '4G'"),
        ("E31_NODE_CPUS", "0-3,x", "E31_NODE_CPUS must be a cpu list such as 0-3,6, got '0-3,x'"),
        ("E31_NODE_CPUS", "3-1", "E31_NODE_CPUS must be a cpu list such as 0-3,6, got '3-1'"),
        ("E31_RATE_CORE_HOUR", "4 cents", "E31_RATE_CORE_HOUR must be a decimal number ≥ 0, got '4 cents'"),
        ("E31_RATE_GPU_HOUR", "-0.5", "E31_RATE_GPU_HOUR must be a decimal number ≥ 0, got '-0.5'"),
        ("DJANGO_SECURE", "maybe", "DJANGO_SECURE must be a boolean (1/0, true/false, yes/no, on/off), got 'maybe'"),
        ("E31_LOG_LEVEL", "loud", "E31_LOG_LEVEL must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL, got 'loud'"),
        (
            "E31_WEBHOOK_ALLOWED_HOSTS",
            "hooks.example.org,10.0.0.0/33",
            "E31_WEBHOOK_ALLOWED_HOSTS must be a comma list of host names, addresses and CIDRs, each with an "
            "optional :port or :low-high, got 'hooks.example.org,10.0.0.0/33': the entry '10.0.0.0/33' is not an "
            "address or a network (CIDR)",
        ),
        (
            "E31_WEBHOOK_ALLOWED_HOSTS",
            "127.0.0.1:9000,10.0.0.0/8:8099-8000",
            "E31_WEBHOOK_ALLOWED_HOSTS must be a comma list of host names, addresses and CIDRs, each with an "
            "optional :port or :low-high, got '127.0.0.1:9000,10.0.0.0/8:8099-8000': the entry "
            "'10.0.0.0/8:8099-8000' names ports outside 1-65535 or a range that ends before it starts",
        ),
        (
            "CELERY_BROKER_URL",
            "nonsense",
            "CELERY_BROKER_URL must be a broker URL such as redis://host:6379/0, got 'nonsense'",
        ),
        (
            "E31_STORE_BACKEND",
            "nope.Storage",
            "E31_STORE_BACKEND must be an importable class path (No module named 'nope')",
        ),
    ],
)
def test_a_bad_value_stops_start_up_naming_the_variable(tmp_path, name, value, message):
    result = start(tmp_path, **{name: value})

    assert result.returncode != 0
    assert f"django.core.exceptions.ImproperlyConfigured: {message}\n" in result.stderr, result.stderr[-2000:]


def test_the_store_options_must_be_a_json_object_and_are_never_echoed(tmp_path):
    result = start(tmp_path, E31_STORE_OPTIONS='["secret_key", "hunter2"]')

    assert result.returncode != 0
    assert "ImproperlyConfigured: E31_STORE_OPTIONS must be a JSON object" in result.stderr
    assert "hunter2" not in result.stderr


def test_a_bad_database_url_is_named_without_its_password(tmp_path):
    result = start(tmp_path, DATABASE_URL="mongodb://e31:hunter2@db.internal/e31")

    assert result.returncode != 0
    assert "ImproperlyConfigured: DATABASE_URL must be a database URL (unknown scheme 'mongodb')" in result.stderr
    assert "hunter2" not in result.stderr


def test_a_short_ledger_key_is_refused_and_never_echoed(monkeypatch):
    monkeypatch.setenv("E31_LEDGER_KEY", "hunter2")

    with pytest.raises(ImproperlyConfigured, match=r"^E31_LEDGER_KEY must be a secret of at least 32 characters") as e:
        envvars.read("E31_LEDGER_KEY")
    assert "hunter2" not in str(e.value)


# --- the reader ---------------------------------------------------------------------------------


def test_unset_or_empty_takes_the_default_and_values_are_trimmed(monkeypatch):
    monkeypatch.delenv("E31_NODE_LOST_S", raising=False)
    assert envvars.read("E31_NODE_LOST_S") == 60
    monkeypatch.setenv("E31_NODE_LOST_S", "  ")
    assert envvars.read("E31_NODE_LOST_S") == 60
    monkeypatch.setenv("E31_NODE_LOST_S", " 90 ")
    assert envvars.read("E31_NODE_LOST_S") == 90
    monkeypatch.setenv("E31_LOG_LEVEL", "debug")
    assert envvars.read("E31_LOG_LEVEL") == "DEBUG"


def test_a_value_starting_with_a_dollar_is_taken_as_it_is(monkeypatch):
    # django-environ's own getters would read "$xyz" as the value of the variable xyz.
    monkeypatch.setenv("DJANGO_SECRET_KEY", "$xyz-not-a-reference")
    assert envvars.read("DJANGO_SECRET_KEY") == "$xyz-not-a-reference"


def test_a_list_default_is_not_shared(monkeypatch):
    monkeypatch.delenv("DJANGO_ALLOWED_HOSTS", raising=False)
    envvars.read("DJANGO_ALLOWED_HOSTS").append("evil.example")
    assert envvars.read("DJANGO_ALLOWED_HOSTS") == ["127.0.0.1", "localhost"]


def test_the_error_is_improperly_configured_in_process_too(monkeypatch):
    monkeypatch.setenv("E31_PIDS_LIMIT", "4")
    with pytest.raises(ImproperlyConfigured, match=r"^E31_PIDS_LIMIT must be an integer ≥ 8, got '4'$"):
        envvars.read("E31_PIDS_LIMIT")


def test_a_nodes_features_are_read_as_a_sorted_list_and_a_bad_one_is_named(monkeypatch):
    monkeypatch.delenv("E31_NODE_FEATURES", raising=False)
    assert envvars.read("E31_NODE_FEATURES") is None  # unset: the node keeps the features set in the admin
    monkeypatch.setenv("E31_NODE_FEATURES", "nvme, bigmem")
    assert envvars.read("E31_NODE_FEATURES") == ["bigmem", "nvme"]
    monkeypatch.setenv("E31_NODE_FEATURES", "bigmem,gpu h100")
    with pytest.raises(ImproperlyConfigured, match=r"^E31_NODE_FEATURES must be a comma list of features .*got "):
        envvars.read("E31_NODE_FEATURES")


# --- consumers take the typed values -------------------------------------------------------------


def test_a_node_lends_the_cores_of_e31_node_cpus_or_else_its_own(settings):
    from pool.nodes import detect_capacity

    settings.E31_NODE_CPUS, settings.E31_NODE_GPUS, settings.E31_NODE_MEMORY_MB = [2, 5], ["0"], 512
    assert (detect_capacity().cpu_ids, detect_capacity().gpu_ids) == ([2, 5], ["0"])

    settings.E31_NODE_CPUS = None
    assert detect_capacity().cpu_ids == sorted(os.sched_getaffinity(0))
