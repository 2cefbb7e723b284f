"""Store quotas: effective-dated per team, set by operators, the settings' default otherwise."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accounting import store_quotas
from accounting.models import PastRateChangeError, StoreQuota
from accounting.store_quotas import BLOCK, OverQuota, StoreStanding

MB = 1024 * 1024


def quota(team, at, megabytes):
    return StoreQuota.objects.create(team=team, effective_from=at, quota_bytes=megabytes * MB, created_at=at)


def test_a_team_without_a_quota_of_its_own_has_the_settings_default(team, settings):
    settings.E31_TEAM_STORE_QUOTA_BYTES = 123 * MB

    assert store_quotas.quota_of(team, now=timezone.now()) == 123 * MB


def test_the_quota_in_force_is_the_latest_row_that_has_started(team, other_team, settings):
    now = timezone.now()
    quota(team, now - timedelta(days=10), 100)
    quota(team, now - timedelta(days=1), 200)
    quota(team, now + timedelta(days=1), 300)

    assert store_quotas.quota_of(team, now=now) == 200 * MB
    assert store_quotas.quota_of(team, now=now + timedelta(days=2)) == 300 * MB
    assert store_quotas.quota_of(team, now=now - timedelta(days=5)) == 100 * MB
    assert store_quotas.quota_of(other_team, now=now) == settings.E31_TEAM_STORE_QUOTA_BYTES
    assert store_quotas.quotas_of([team, other_team], now=now) == {
        team.pk: 200 * MB,
        other_team.pk: settings.E31_TEAM_STORE_QUOTA_BYTES,
    }


def test_a_quota_in_force_can_be_neither_changed_nor_deleted_a_future_one_can(team):
    now = timezone.now()
    past, future = quota(team, now - timedelta(days=1), 100), quota(team, now + timedelta(days=1), 200)

    past.quota_bytes = 1
    with pytest.raises(PastRateChangeError):
        past.save()
    with pytest.raises(PastRateChangeError):
        past.delete()
    future.quota_bytes = 1
    future.save()
    future.delete()
    assert list(StoreQuota.objects.values_list("quota_bytes", flat=True)) == [100 * MB]


def test_operators_set_a_quota_from_now_on_in_the_admin_and_not_in_the_past(operator, client, team):
    client.force_login(operator)
    body = {"team": team.pk, "effective_from_0": "2020-01-01", "effective_from_1": "00:00:00",
            "quota_bytes": str(5 * MB), "note": "backdated"}  # fmt: skip

    refused = client.post("/admin/accounting/storequota/add/", body)
    later = timezone.now() + timedelta(hours=1)
    added = client.post(
        "/admin/accounting/storequota/add/",
        {**body, "effective_from_0": f"{later:%Y-%m-%d}", "effective_from_1": f"{later:%H:%M:%S}", "note": "more"},
    )

    assert refused.status_code == 200 and b"the past keeps the quota it had" in refused.content
    assert added.status_code == 302
    [row] = StoreQuota.objects.all()
    assert row.quota_bytes == 5 * MB and row.created_by == operator


@pytest.mark.parametrize(
    ("size", "stored"), [(0, BLOCK), (1, BLOCK), (BLOCK, BLOCK), (BLOCK + 1, 2 * BLOCK), (250 * MB, 250 * MB)]
)
def test_a_file_takes_whole_blocks_in_the_store_at_least_one(size, stored):
    assert store_quotas.stored_bytes(size) == stored


def test_outputs_that_would_pass_the_quota_are_refused_with_the_quota_and_the_sizes_named():
    standing = StoreStanding("lab", used=10 * MB, quota=100 * MB)

    store_quotas.check(standing, adding=90 * MB, files=3)  # exactly at the quota: kept
    with pytest.raises(OverQuota) as refused:
        store_quotas.check(standing, adding=90 * MB + BLOCK, files=4)

    words = str(refused.value)
    assert "over the store quota of team lab" in words
    assert f"100.0 MB ({100 * MB} bytes)" in words and f"holds 10.0 MB ({10 * MB} bytes)" in words
    assert f"these 4 outputs would add 90.0 MB ({90 * MB + BLOCK} bytes" in words
    assert f"{BLOCK} bytes past the quota, so none was kept" in words
