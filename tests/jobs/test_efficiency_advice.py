"""Right advice (jobs.web.figures): "asked for more than it used" only where a smaller request exists, named;
an out-of-memory job said to have reached its limit and never told to ask for less; the cpu use of short jobs
measured as the API measures it, or said why not."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from accounting.models import Record
from jobs.models import Job, Outcome
from jobs.submit.forms import JobForm
from jobs.web.figures import MEMORY_MIN_MB, figures, memory_request_for

AT = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)


def ended(*, cpus=1, memory_mb=256, held_s=600, cpu_s=0.0, peak_mb=None, outcome=Outcome.SUCCEEDED):
    """The figures of a job whose one hold had this record."""
    record = Record(cpus=cpus, memory_mb=memory_mb, held_seconds=Decimal(held_s), cpu_seconds=Decimal(str(cpu_s)),
                    memory_peak_mb=peak_mb, outcome=outcome, cost=Decimal("0.01"), held_at=AT)  # fmt: skip
    job = Job(submitted_at=AT - timedelta(seconds=30), started_at=AT, finished_at=AT + timedelta(seconds=float(held_s)))
    return figures(job, [record])


# --- cpu ---------------------------------------------------------------------------------------------


def test_a_one_cpu_job_is_never_over_asked_on_cpu_however_idle():
    f = ended(cpus=1, held_s=600, cpu_s=6, peak_mb=200)
    assert f.cpu_used == 0.01
    assert not f.cpu_over_asked and not f.over_asked and f.advice == ""


def test_a_four_cpu_job_using_one_is_told_one_cpu_would_have_done():
    f = ended(cpus=4, held_s=600, cpu_s=540, peak_mb=200)  # 0.9 of a core on average
    assert f.cpu_used == 0.225
    assert f.cpus_enough == 1 and f.over_asked
    assert f.advice == "Asked for more than it used: 1 cpu would have done."


def test_the_cpus_advised_cover_the_average_use_rounded_up():
    f = ended(cpus=8, held_s=100, cpu_s=250, peak_mb=200)  # 2.5 cores busy
    assert f.cpus_enough == 3 and f.advice == "Asked for more than it used: 3 cpu would have done."


def test_a_job_using_half_its_cpus_or_more_is_not_over_asked():
    assert not ended(cpus=4, held_s=100, cpu_s=200, peak_mb=200).cpu_over_asked  # exactly 2 of 4
    assert not ended(cpus=2, held_s=100, cpu_s=150, peak_mb=200).cpu_over_asked


# --- memory ------------------------------------------------------------------------------------------


def test_memory_over_asked_names_a_smaller_request_above_the_peak():
    f = ended(memory_mb=1024, peak_mb=200)
    assert f.memory_used == 200 / 1024 and f.memory_enough_mb == 256
    assert f.advice == "Asked for more than it used: 256 MB would have done."


def test_no_memory_advice_when_the_forms_least_is_all_that_is_smaller():
    f = ended(memory_mb=MEMORY_MIN_MB, peak_mb=3)
    assert f.memory_used == 3 / MEMORY_MIN_MB and not f.memory_over_asked and f.advice == ""
    assert ended(memory_mb=24, peak_mb=3).memory_enough_mb == MEMORY_MIN_MB


def test_the_least_memory_advised_is_the_forms_least():
    assert JobForm.base_fields["memory_mb"].min_value == MEMORY_MIN_MB


def test_memory_requests_advised_are_round_and_leave_room_above_the_peak():
    assert [memory_request_for(peak) for peak in (1, 13, 14, 100, 200, 300, 700, 1000, 3000)] == [
        16, 16, 24, 128, 256, 384, 1024, 1536, 4096,
    ]  # fmt: skip


def test_both_advised_at_once_in_one_sentence():
    f = ended(cpus=4, memory_mb=4096, held_s=600, cpu_s=300, peak_mb=500)
    assert f.advice == "Asked for more than it used: 1 cpu and 768 MB would have done."


# --- out of memory -----------------------------------------------------------------------------------


def test_an_out_of_memory_job_says_it_reached_its_limit_and_is_never_told_to_ask_for_less():
    for peak, share in ((None, None), (20, 20 / 64), (50, 50 / 64), (64, 1.0)):
        f = ended(memory_mb=64, peak_mb=peak, cpu_s=30, outcome=Outcome.OUT_OF_MEMORY)
        assert f.memory_used == share and f.memory_note == "reached its 64 MB limit"
        assert not f.memory_over_asked


# --- short jobs --------------------------------------------------------------------------------------


def test_a_three_second_job_has_its_cpu_share_measured_but_no_advice_on_cpus():
    f = ended(cpus=4, held_s=3, cpu_s=1.5, peak_mb=10, memory_mb=64)
    assert f.cpu_used == 0.125 and f.cpu_note == ""
    assert not f.cpu_over_asked  # start-up weighs too much in 3 s to say fewer cpus would do
    assert f.memory_enough_mb == 16  # a peak says as much after 3 s as after an hour


def test_a_job_held_under_a_second_has_its_cpu_share_measured_but_no_advice_on_cpus():
    f = ended(cpus=2, held_s=Decimal("0.4"), cpu_s=0.1, peak_mb=5, memory_mb=64)
    assert f.cpu_used == 0.125 and f.cpu_note == ""  # 0.1 s of 0.4 s × 2 cpus
    assert not f.cpu_over_asked


def test_a_node_that_read_nothing_says_so_instead_of_a_zero():
    f = ended(cpus=2, held_s=600, cpu_s=0, peak_mb=None)
    assert f.cpu_used is None and f.cpu_note == "not measured by its node"
    assert f.memory_used is None and f.memory_note == "not measured by its node"
    assert not f.over_asked


def test_a_job_that_never_held_compute_has_no_efficiency_and_no_note():
    f = figures(Job(submitted_at=AT), [])
    assert f.cpu_used is None and f.memory_used is None and f.cpu_note == f.memory_note == ""
