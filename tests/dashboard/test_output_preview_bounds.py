"""A previewed output is bounded in what the page renders, whatever the file holds (jobs.web.previews.preview)."""

from django.utils import timezone

from jobs.models import Outcome
from jobs.web.previews import PREVIEW_COLUMNS
from tests.factories import ended_job, store_output


def test_a_csv_of_one_very_wide_row_previews_a_bounded_number_of_cells(client, member, team, local_node):
    job = ended_job(member, team, outcome=Outcome.SUCCEEDED, at=timezone.now())
    store_output(job, "wide.csv", b"," * 200_000 + b"\n" + b"1," * 50_000 + b"\n")
    client.force_login(member)

    response = client.get(f"/jobs/{job.pk}/preview/wide.csv")

    assert response.status_code == 200
    rows = response.context["preview"]["header"] + response.context["preview"]["rows"]
    assert [len(row) for row in rows] == [PREVIEW_COLUMNS, PREVIEW_COLUMNS]
    assert response.context["preview"]["cut"] and len(response.content) < 100_000
    assert "The start of the file only" in response.content.decode()


def test_a_narrow_csv_is_previewed_whole(client, member, team, local_node):
    job = ended_job(member, team, outcome=Outcome.SUCCEEDED, at=timezone.now())
    store_output(job, "t.csv", b"a,b\n1,2\n")
    client.force_login(member)

    preview = client.get(f"/jobs/{job.pk}/preview/t.csv").context["preview"]

    assert preview["header"] == [["a", "b"]] and preview["rows"] == [["1", "2"]] and not preview["cut"]
