"""Every benchmark of bench/ still runs to its figures: each once at its smallest size, as a process of its
own, must exit 0 and print its headline lines last (`metric: value unit`). No figure is asserted: these
sizes measure nothing, they only keep a benchmark from rotting unseen.

One after another on one xdist worker (each starts what it needs: its own throw-away database, and those
with a node a Celery worker on a Redis database of their own and containers of their own namespace, apart from
the suite's databases, Redis databases and namespaces, and from another suite's benches: `bench_env`)."""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIGURE = re.compile(r"([a-z][a-z0-9_]*): -?[0-9][0-9,.]*(?: .*)?")

# name: (its smallest size, the names of its headline figures, in the order it prints them last)
SMOKE: dict[str, tuple[list[str], list[str]]] = {
    "scheduler": (["--jobs", "200", "--nodes", "4", "--cores", "16"], [
        "holds_per_s", "reservation_holds_per_s", "reservation_vs_plain_ratio", "policy_reservation_holds_per_s",
        "policy_vs_plain_ratio"]),
    "policy": (["--jobs", "200"], [
        "easy_bounded_slowdown", "pool_fair_share_bounded_slowdown", "bounded_slowdown_vs_easy_ratio",
        "pool_fair_share_over_twice_easy_wait"]),
    "accounting": (["--records", "1000"], [
        "anchor_count_s", "statement_s", "statement_vs_count_ratio", "utilisation_s", "utilisation_vs_count_ratio",
        "hmac_per_s", "verify_per_s", "verify_vs_bare_hmac", "verify_full_s", "verify_daily_s",
        "verify_daily_vs_full_ratio"]),
    "digest": (["--members", "20", "--jobs", "500", "--teams", "2", "--repeats", "1"], [
        "anchor_s", "digest_prepare_s", "digest_vs_anchor_ratio", "digest_quiet_pass_ms",
        "digest_quiet_pass_vs_anchor_ratio"]),
    "pages": (["--jobs", "300", "--requests", "2", "--warm-up", "1"], [
        "anchor_select_ms", *(f"{page}_{figure}" for page in ("review", "jobs", "jobs_deep", "jobs_filtered", "job",
                                                              "operator", "usage")
                              for figure in ("p95_ms", "vs_anchor_ratio"))]),
    "api": (["--submissions", "10", "--jobs", "100", "--lists", "10", "--clients", "2", "--workers", "1"], [
        "anchor_token_creates_per_s", "submissions_per_s", "submission_to_anchor_ratio", "anchor_token_list_p95_ms",
        "api_list_p95_ms", "list_to_anchor_ratio", "api_list_filtered_p95_ms", "filtered_list_to_anchor_ratio"]),
    "store": (["--mb", "2"], [
        "upload_fs_s", "upload_s3_s", "upload_fs_rss_growth_mb", "upload_s3_rss_growth_mb", "upload_s3_vs_fs_ratio",
        "staging_fs_mb_s", "staging_s3_mb_s", "staging_s3_vs_fs_ratio", "cp_mb_s", "staging_fs_vs_cp_ratio",
        "staging_s3_vs_cp_ratio"]),
    "isolation": (["--runs", "1", "--loop", "10000", "--syscalls", "2000"], [
        f"{job}_{figure}" for job in ("trivial", "cpu", "syscalls") for figure in ("runc_s", "runsc_s", "ratio")]),
    "lifecycle": (["--runs", "2"], [
        "raw_sdk_run_s", "lifecycle_recorded_s", "lifecycle_recorded_vs_sdk_ratio", "raw_docker_run_s", "lifecycle_s",
        "lifecycle_overhead_s", "lifecycle_vs_raw_ratio"]),
    "throughput": (["--jobs", "2"], ["jobs_per_s", "raw_sdk_jobs_per_s", "throughput_ratio"]),
    "arrays": (["--tasks", "2", "--repeats", "1", "--submit-tasks", "20", "--pass-tasks", "20", "--quiet-passes", "2",
                "--nodes", "2", "--cores", "8"], [
        "single_jobs_per_s", "array_tasks_per_s", "array_vs_jobs_ratio", "anchor_bulk_create_s", "array_submit_s",
        "array_submit_vs_anchor_ratio", "api_array_submit_s", "api_array_submit_vs_anchor_ratio",
        "pass_holds_per_s_jobs", "pass_holds_per_s_array", "pass_array_vs_jobs_ratio",
        "pass_holds_per_s_array_max_running", "pass_array_max_running_vs_jobs_ratio", "pass_empty_queue_ms",
        "pass_held_back_ms", "pass_held_back_vs_empty_ratio"]),
    "schedules": (["--schedules", "20", "--profiled", "10", "--concurrency", "2"], [
        "anchor_bulk_create_s", "pass_s", "pass_runs_per_s", "pass_vs_anchor_ratio", "due_minute_s",
        "due_minute_vs_pass_ratio"]),
    "webhooks": (["--webhooks", "1", "--due", "2", "--deliveries", "2", "--receivers", "2", "--silent-webhooks", "1",
                  "--redeliveries", "1", "--repeats", "1"], [
        "anchor_bulk_create_ms", "enqueue_ms", "enqueue_vs_anchor_ratio", "anchor_oldest_due_claim_ms", "claim_ms",
        "claim_vs_anchor_ratio", "anchor_posts_per_s", "pass_one_receiver_per_s", "pass_one_receiver_vs_anchor_ratio",
        "pass_receivers_per_s", "pass_receivers_vs_anchor_ratio", "anchor_quiet_wait_s", "good_team_wait_s",
        "good_team_wait_vs_quiet_ratio"]),
    "scale": (["--nodes", "10", "--jobs", "100", "--clients", "2", "--seconds", "0.5", "--lost", "2",
               "--beat-seconds", "3", "--interval", "2"], [
        "nodes_by_heartbeat_rate", "nodes_per_postgres_core", "anchor_update_new_connection_per_s",
        "heartbeats_alone_per_s", "heartbeats_alone_vs_anchor_ratio", "anchor_update_kept_connection_per_s",
        "heartbeats_kept_connection_per_s", "heartbeats_kept_vs_anchor_ratio", "heartbeats_with_pass_per_s",
        "heartbeats_with_pass_vs_anchor_ratio", "anchor_postgres_cpu_per_update_ms",
        "server_postgres_cpu_per_heartbeat", "postgres_cpu_vs_anchor_ratio", "anchor_update_p50_ms",
        "heartbeat_p50_ms_at_required_rate", "heartbeat_p99_ms_at_required_rate", "heartbeat_p50_vs_anchor_ratio",
        "anchor_queue_read_s", "full_pass_s", "full_pass_vs_queue_read_ratio", "anchor_reaper_updates_s", "reaper_s",
        "reaper_vs_anchor_ratio", "anchor_bare_gunicorn_rss_mb", "web_rss_mb", "web_rss_vs_anchor_ratio",
        "beat_rss_mb", "holds_per_s"]),
}  # fmt: skip
WITH_CONTAINERS = {"isolation", "lifecycle", "throughput", "arrays"}
WITH_WORKER = {"lifecycle", "throughput", "arrays", "schedules"}


def bench_env() -> dict[str, str]:
    """This process's environment without the suite's settings (its database, broker, folders, namespace): a
    benchmark makes its own, as when it is run by hand; named after this suite's E31_TEST_ID, on the Redis
    database after its xdist workers' (tests: E31_TEST_REDIS_DB + n), so two suites at once keep apart."""
    suites = ("DJANGO_", "DATABASE_", "CELERY_", "E31_", "PYTEST_")
    kept = {name: value for name, value in os.environ.items() if not name.startswith(suites)}
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    broker_db = int(os.environ.get("E31_TEST_REDIS_DB", "10")) + workers
    return {**kept, "BENCH_ID": os.environ.get("E31_TEST_ID", "main"), "BENCH_REDIS_DB": str(broker_db)}


def headline(output: str) -> list[str]:
    """The names of the figures printed last, one a line."""
    names: list[str] = []
    for line in reversed(output.rstrip("\n").splitlines()):
        figure = FIGURE.fullmatch(line)
        if figure is None:
            break
        names.insert(0, figure[1])
    return names


def marks(name: str) -> list[pytest.MarkDecorator]:
    return [pytest.mark.docker] * (name in WITH_CONTAINERS) + [pytest.mark.celery] * (name in WITH_WORKER)


@pytest.mark.bench
@pytest.mark.xdist_group("benches")
@pytest.mark.parametrize(
    ("name", "args", "figures"), [pytest.param(n, a, f, id=n, marks=marks(n)) for n, (a, f) in SMOKE.items()]
)
def test_the_benchmark_runs_to_its_headline_figures(name, args, figures):
    done = subprocess.run(
        [sys.executable, f"bench/{name}.py", *args], cwd=ROOT, env=bench_env(), capture_output=True, text=True,
        timeout=300,  # far above any smallest run: a bench stuck waiting fails here, not the whole suite
    )  # fmt: skip

    said = f"bench/{name}.py {' '.join(args)}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    assert done.returncode == 0, said
    assert headline(done.stdout) == figures, said


def test_every_benchmark_has_a_smoke_run_and_a_quick_size():
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "bench" / "run.py")
    assert spec is not None and spec.loader is not None
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)

    scripts = {path.stem for path in (ROOT / "bench").glob("*.py") if not path.stem.startswith("_")} - {"run"}

    assert scripts == set(SMOKE) == set(run.QUICK)
