"""The node's sampling of a running container (worker.sampler): what it reads of the run's cgroup, v1 or
v2, and how often and how safely the watch loop keeps a sample."""

from pathlib import Path

import pytest
from django.db import OperationalError

from jobs.lifecycle.usage import Reading, Sample
from worker import sampler as sampler_module
from worker.sampler import FIRST_SAMPLE_S, Sampler
from worker.sandbox.docker import read_cgroup_now

MB = 1024 * 1024
PARENT = "/e31/job-1"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_reads_cgroup_v1_cpu_and_memory_without_the_cache_the_kernel_can_take_back(tmp_path):
    write(tmp_path / "cpuacct/e31/job-1/cpuacct.usage", "2500000000\n")
    write(tmp_path / "memory/e31/job-1/memory.usage_in_bytes", f"{100 * MB}\n")
    write(tmp_path / "memory/e31/job-1/memory.stat", f"cache {40 * MB}\ntotal_inactive_file {30 * MB}\n")

    reading = read_cgroup_now(tmp_path, PARENT)

    assert reading is not None and reading.cpu_seconds == 2.5 and reading.memory_mb == 70


def test_reads_cgroup_v2_cpu_and_memory(tmp_path):
    write(tmp_path / "e31/job-1/cpu.stat", "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n")
    write(tmp_path / "e31/job-1/memory.current", f"{50 * MB}\n")
    write(tmp_path / "e31/job-1/memory.stat", f"anon {40 * MB}\ninactive_file {8 * MB}\n")

    reading = read_cgroup_now(tmp_path, PARENT)

    assert reading is not None and reading.cpu_seconds == 1.5 and reading.memory_mb == 42


def test_a_cgroup_that_is_gone_or_half_there_reads_as_none(tmp_path):
    assert read_cgroup_now(tmp_path, PARENT) is None
    write(tmp_path / "cpuacct/e31/job-1/cpuacct.usage", "1\n")  # no memory controller for it
    assert read_cgroup_now(tmp_path, PARENT) is None


class Job:
    pk, attempt = "job-1", 1


class FakeSandbox:
    """Readings handed out in turn (None: the cgroup could not be read)."""

    def __init__(self, *readings: Reading | None):
        self.readings = list(readings)
        self.read = 0

    def reading(self, run_key: str) -> Reading | None:
        assert run_key == "job-1-1"
        self.read += 1
        return self.readings.pop(0)


@pytest.fixture
def clock(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(sampler_module.time, "monotonic", lambda: now[0])
    return now


@pytest.fixture
def kept(monkeypatch):
    samples: list[Sample] = []
    monkeypatch.setattr(sampler_module, "record_usage", lambda job_id, sample, *, attempt: samples.append(sample))
    return samples


def test_the_first_sample_comes_soon_then_one_every_interval_and_polls_between_read_nothing(clock, kept, settings):
    settings.E31_USAGE_SAMPLE_S = 5
    sandbox = FakeSandbox(Reading(100.0, 0.0, 1), Reading(101.0, 1.0, 2), Reading(106.0, 3.5, 3))
    sampler = Sampler(sandbox, Job())  # the first reading, at the watch's start

    sampler.poll()
    clock[0] = 100.0 + FIRST_SAMPLE_S
    sampler.poll()
    clock[0] += 4.9
    sampler.poll()
    clock[0] += 0.1
    sampler.poll()

    assert sandbox.read == 3
    assert [(s.cpu_percent, s.memory_mb) for s in kept] == [(100.0, 2), (50.0, 3)]


def test_an_unreadable_cgroup_gives_no_sample_and_the_next_reading_starts_again(clock, kept, settings):
    settings.E31_USAGE_SAMPLE_S = 1
    sandbox = FakeSandbox(None, Reading(101.0, 1.0, 5), None, Reading(103.0, 3.0, 6), Reading(104.0, 3.2, 7))
    sampler = Sampler(sandbox, Job())
    for _ in range(4):
        clock[0] += 1
        sampler.poll()

    assert [(s.cpu_percent, s.memory_mb) for s in kept] == [(100.0, 6), (20.0, 7)]


def test_sampling_never_fails_the_run(clock, monkeypatch, settings):
    settings.E31_USAGE_SAMPLE_S = 1
    calls = []

    def failing(job_id, sample, *, attempt):
        calls.append(sample)
        raise OperationalError("the database is away") if len(calls) <= 2 else RuntimeError("a bug")

    monkeypatch.setattr(sampler_module, "record_usage", failing)
    sampler = Sampler(FakeSandbox(*(Reading(100.0 + i, i, 1) for i in range(6))), Job())
    for _ in range(5):
        clock[0] += 1
        sampler.poll()  # raises nothing

    # A database away loses that sample (tried twice, as once_more does); after a bug, no more samples.
    assert len(calls) == 3
