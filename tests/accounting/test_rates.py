"""The rate card: effective-dated, history kept, the rate in force at RENT costs the record and is kept on it."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from accounting.models import PastRateChangeError, RateCard
from accounting.rates import Rate, RateBook, core_hours, estimate, rate_in_force, settings_rate
from accounting.verification import verify_ledger
from core.when import BAD_DURATION
from jobs.lifecycle.actions import hold
from jobs.models import Outcome
from pool.placement.types import Placement
from tests.accounting.conftest import NOW
from tests.factories import RuntimeImageFactory, run_to_release, submit_job


def rate(at, *, core="0.10", gb="0.01", gpu="1.00", image=""):
    return RateCard.objects.create(
        effective_from=at, runtime_image=image, core_hour=Decimal(core), gb_hour=Decimal(gb), gpu_hour=Decimal(gpu),
        created_at=at,
    )  # fmt: skip


def test_the_cost_uses_the_rate_in_force_at_rent_even_when_it_changes_before_release(released, member, team):
    first = rate(NOW - timedelta(days=1), core="0.10", gb="0.00", gpu="0.00")
    rate(NOW + timedelta(minutes=30), core="5.00", gb="0.00", gpu="0.00")  # after RENT, before release

    record = released(member, team, held_at=NOW, held_for=timedelta(hours=2), cpus=3, memory_mb=1024)

    assert record.cost == Decimal("0.600000")  # 3 cores × 2 h × 0.10
    assert (record.rate_id, record.rate_core_hour, record.rate_gb_hour) == (first.pk, Decimal("0.1"), Decimal("0"))
    assert record.currency == "EUR" and record.layout == 2
    assert verify_ledger(heads_files=[])


def test_a_record_held_after_the_change_is_costed_at_the_new_rate(released, member, team):
    rate(NOW - timedelta(days=1), core="0.10", gb="0", gpu="0")
    later = rate(NOW + timedelta(minutes=30), core="5.00", gb="0", gpu="0")

    record = released(member, team, held_at=NOW + timedelta(hours=1), held_for=timedelta(hours=1), cpus=1)

    assert (record.cost, record.rate_id) == (Decimal("5.000000"), later.pk)


def test_memory_and_gpus_are_priced_per_gib_hour_and_gpu_hour(released, member, team):
    rate(NOW - timedelta(days=1), core="0.04", gb="0.005", gpu="0.90")

    record = released(member, team, held_for=timedelta(minutes=90), cpus=2, memory_mb=3072, gpus=1)

    # 1.5 h × (2 × 0.04 + 3 GiB × 0.005 + 1 × 0.90)
    assert record.cost == Decimal("1.492500")


def test_without_a_rate_card_the_settings_rates_apply_and_say_so(released, member, team, settings):
    settings.E31_RATE_CORE_HOUR, settings.E31_RATE_GB_HOUR = Decimal("0.25"), Decimal("0.008")

    record = released(member, team, held_for=timedelta(hours=1), cpus=2, memory_mb=64)

    assert (record.rate_id, record.rate_core_hour, record.rate_gb_hour) == (0, Decimal("0.25"), Decimal("0.008"))
    assert record.cost == Decimal("0.500500")  # 1 h × (2 × 0.25 + 64/1024 GiB × 0.008)


def test_a_rate_for_a_runtime_image_is_preferred_over_the_general_one(db):
    general = rate(NOW - timedelta(days=2))
    licensed = rate(NOW - timedelta(days=1), core="2.00", image="matlab")

    assert rate_in_force(NOW, image="matlab").id == licensed.pk
    assert rate_in_force(NOW, image="busybox").id == general.pk
    assert RateBook.load().rate_in_force(NOW, image="matlab").id == licensed.pk
    assert RateBook.load().rate_in_force(NOW, image="other").id == general.pk
    assert rate_in_force(NOW - timedelta(days=3)).id == 0  # before any row: the settings'


def test_a_book_works_out_each_request_once_per_rate_and_as_estimate_does(db):
    rate(NOW - timedelta(days=2), core="0.10")
    rate(NOW - timedelta(days=1), core="2.00", image="matlab")
    book = RateBook.load()
    asks = [
        (NOW, "busybox", 2, 1024, 0, 3600), (NOW, "busybox", 2, 1024, 0, 3600), (NOW, "matlab", 2, 1024, 0, 3600),
        (NOW, "busybox", 4, 1024, 0, 3600), (NOW - timedelta(days=3), "busybox", 2, 1024, 0, 3600),
    ]  # fmt: skip

    worked_out = [book.estimate(at, image=i, cpus=c, memory_mb=m, gpus=g, time_limit_s=t) for at, i, c, m, g, t in asks]

    for (at, image, cpus, memory_mb, gpus, limit), got in zip(asks, worked_out, strict=True):
        alone = estimate(
            cpus=cpus, memory_mb=memory_mb, gpus=gpus, time_limit_s=limit, rate=rate_in_force(at, image=image)
        )
        assert got == alone
    assert worked_out[0] is worked_out[1]  # the same request at the same rate: once
    assert len({e.cost for e in worked_out}) == 4  # the image's rate, more cores, the settings' rate before any row


def test_a_rate_in_force_can_be_neither_changed_nor_deleted_a_future_one_can(db):
    now = timezone.now()
    past, future = rate(now - timedelta(days=1)), rate(now + timedelta(days=1))

    past.core_hour = Decimal("9")
    with pytest.raises(PastRateChangeError):
        past.save()
    with pytest.raises(PastRateChangeError):
        past.delete()
    future.core_hour = Decimal("9")
    future.save()
    future.delete()
    assert list(RateCard.objects.values_list("core_hour", flat=True)) == [Decimal("0.100000")]


def test_the_admin_adds_rates_from_now_on_and_keeps_those_in_force(operator, client):
    client.force_login(operator)
    past = rate(timezone.now() - timedelta(days=1))
    body = {"effective_from_0": "2020-01-01", "effective_from_1": "00:00:00", "runtime_image": "", "core_hour": "1",
            "gb_hour": "0", "gpu_hour": "0", "note": "backdated"}  # fmt: skip

    refused = client.post("/admin/accounting/ratecard/add/", body)
    change = client.post(f"/admin/accounting/ratecard/{past.pk}/change/", {**body, "effective_from_0": "2030-01-01"})

    assert refused.status_code == 200 and b"the past keeps the rates it had" in refused.content
    assert change.status_code == 403
    assert RateCard.objects.count() == 1


def test_the_estimate_equals_what_a_job_held_to_its_bound_costs(api, member, team, nodes, settings):
    settings.E31_HOLD_OVERHEAD_S = 60
    rate(NOW - timedelta(days=1), core="0.07", gb="0.003", gpu="0.5")
    RuntimeImageFactory(name="busybox")
    asked = {"cpus": 2, "memory_mb": 1536, "gpus": 1, "time_limit_s": 5400, "image": "busybox"}

    before = api.post("/api/v1/jobs/estimate/", asked, format="json")
    job = submit_job(member, team, image="busybox", **{k: v for k, v in asked.items() if k != "image"})
    on = nodes["n1"]
    hold([Placement(job.pk, job.attempt, on, on.cpu_ids[:2], on.gpu_ids[:1], job.memory_mb)], now=NOW)
    after = api.get(f"/api/v1/jobs/{job.pk}/").json()["estimated_cost"]
    job.refresh_from_db()
    run_to_release(job, now=NOW + timedelta(hours=3), outcome=Outcome.TIMED_OUT)  # released late: metered to its bound

    assert before.status_code == 200
    cost = job.records.get().cost
    assert before.json()["exact"] == after["exact"] == format(cost, "f")
    assert before.json()["held_seconds"] == after["held_seconds"] == 5460  # its time limit and the overhead
    assert after["currency"] == "EUR" and after["amount"] == "0.98"  # 1.5 h 1 min × (0.14 + 0.0045 + 0.5)
    assert cost == Decimal("0.977492")


def test_the_worst_case_is_the_request_held_for_its_time_limit_and_the_overhead(settings):
    settings.E31_HOLD_OVERHEAD_S = 90
    hourly = Rate(0, core_hour=Decimal("1"), gb_hour=Decimal("0.5"), gpu_hour=Decimal("2"), currency="EUR")

    worst = estimate(cpus=3, memory_mb=2048, gpus=1, time_limit_s=3510, rate=hourly)

    assert worst.held_seconds == 3600
    assert worst.cost == Decimal("6.000000")  # one hour of 3 × 1 + 2 GiB × 0.5 + 1 × 2
    assert worst.core_hours == Decimal("3.000000")


def test_worst_case_core_hours_are_rounded_up_never_below_what_the_meter_counts(settings):
    settings.E31_HOLD_OVERHEAD_S = 10

    worst = estimate(cpus=1, memory_mb=0, gpus=0, time_limit_s=1, rate=settings_rate())  # 11 s: 0.0030555… h

    assert worst.core_hours == Decimal("0.003056")


def test_the_estimate_endpoint_answers_400_on_a_bad_request(api):
    response = api.post("/api/v1/jobs/estimate/", {"cpus": 0, "memory_mb": "lots"}, format="json")

    assert response.status_code == 400
    assert set(response.json()) >= {"cpus", "memory_mb", "time_limit_s"}


def test_the_form_shows_the_estimate_of_what_is_typed(client, member, settings):
    settings.E31_HOLD_OVERHEAD_S = 60
    client.force_login(member)

    partial = client.get("/jobs/estimate/", {"cpus": "4", "memory_mb": "1024", "time_limit_s": "3600"})
    empty = client.get("/jobs/estimate/", {"cpus": "4"})
    form = client.get("/jobs/new/")

    assert b"Worst case: <strong>0.17 EUR</strong>" in partial.content  # 4 × 0.04 + 1 × 0.005 (the settings')
    assert b"(4.07 core-hours), if the job" in partial.content  # 4 cores × 1 h 01 m, to two places
    assert b"the platform's 1 m 00 s to start, stop and collect it (1 h 01 m in all)" in partial.content
    assert b"appears once" in empty.content
    assert b'id="estimate"' in form.content and b'hx-get="/jobs/estimate/"' in form.content


def test_the_estimate_endpoint_reads_a_time_limit_with_units_as_the_form_does(api):
    asked = {"cpus": 1, "memory_mb": 256}

    with_units = api.post("/api/v1/jobs/estimate/", {**asked, "time_limit_s": "1h30m"}, format="json")
    in_seconds = api.post("/api/v1/jobs/estimate/", {**asked, "time_limit_s": 5400}, format="json")
    unreadable = api.post("/api/v1/jobs/estimate/", {**asked, "time_limit_s": "soon"}, format="json")

    assert with_units.status_code == 200 and with_units.json() == in_seconds.json()
    assert unreadable.status_code == 400 and unreadable.json() == {"time_limit_s": [BAD_DURATION]}


def test_the_estimate_says_its_cost_as_every_page_writes_money(settings):
    settings.E31_HOLD_OVERHEAD_S = 10
    tiny = Rate(0, core_hour=Decimal("0.001"), gb_hour=Decimal("0"), gpu_hour=Decimal("0"), currency="EUR")
    free = Rate(0, core_hour=Decimal("0"), gb_hour=Decimal("0"), gpu_hour=Decimal("0"), currency="EUR")

    assert estimate(cpus=1, memory_mb=0, gpus=0, time_limit_s=50, rate=tiny).cost_text == "less than 0.01 EUR"
    assert estimate(cpus=1, memory_mb=0, gpus=0, time_limit_s=50, rate=free).cost_text == "0.00 EUR"


def test_core_hours_are_the_seconds_held_times_the_cores_over_an_hour():
    assert core_hours(Decimal(2) * Decimal(5400)) == Decimal(3)  # 2 cores for an hour and a half
    assert core_hours(Decimal("0.9")) == Decimal("0.00025")
    assert core_hours(900.0) == 0.25
