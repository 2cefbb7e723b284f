"""Store use against the quota, on /usage/ and in GET /api/v1/accounting/usage/: each of the caller's
teams (operators in the API: every team), what the store holds for it and its quota, in bytes."""

from django.utils import timezone

from accounting.models import StoreQuota
from accounting.store_quotas import BLOCK
from jobs.models import Job
from tests.factories import store_output, submit_job

USAGE = "/api/v1/accounting/usage/"
MB = 1024 * 1024


def kept(member, team, *, data: bytes = b"", output: bytes = b"") -> Job:
    job = submit_job(member, team, files={"in.bin": data} if data else None)
    if output:
        store_output(job, "out.bin", output)
    return job


def test_the_api_gives_each_of_my_teams_store_use_against_its_quota(api, member, team, outsider, other_team):
    StoreQuota.objects.create(team=team, effective_from=timezone.now(), quota_bytes=2 * MB, created_at=timezone.now())
    kept(member, team, data=b"x" * 5000, output=b"y" * 10)
    kept(outsider, other_team, output=b"secret")

    body = api.get(USAGE).json()

    assert body["store"] == [{"team": team.slug, "store_used_bytes": 3 * BLOCK, "store_quota_bytes": 2 * MB}]


def test_operators_see_every_teams_store_in_the_api(operator_api, member, team, outsider, other_team, settings):
    kept(outsider, other_team, output=b"z")

    body = operator_api.get(USAGE).json()

    default = settings.E31_TEAM_STORE_QUOTA_BYTES
    rows = {row["team"]: (row["store_used_bytes"], row["store_quota_bytes"]) for row in body["store"]}
    assert rows[team.slug] == (0, default) and rows[other_team.slug] == (BLOCK, default)


def test_files_deleted_by_retention_leave_the_store_use(api, member, team):
    job = kept(member, team, output=b"y" * (BLOCK * 3))
    Job.objects.filter(pk=job.pk).update(files_deleted_at=timezone.now())

    [row] = api.get(USAGE).json()["store"]

    assert row["store_used_bytes"] == 0


def test_the_api_with_a_bad_filter_is_still_a_400(api):
    assert api.get(f"{USAGE}?group_by=planet").status_code == 400


def test_the_page_shows_my_teams_store_use_against_its_quota(client, member, team, outsider, other_team):
    StoreQuota.objects.create(team=team, effective_from=timezone.now(), quota_bytes=MB, created_at=timezone.now())
    kept(member, team, output=b"y" * (MB // 2))
    kept(outsider, other_team, output=b"secret")
    client.force_login(member)

    page = client.get("/usage/").content.decode()

    assert f'<tr id="store-{team.slug}">' in page and f"store-{other_team.slug}" not in page
    assert f'title="{MB // 2} bytes">512.0\xa0KB</td>' in page
    assert f'title="{MB} bytes">1.0\xa0MB</td>' in page
    assert 'value="50">50%</meter>' in page
