"""jobs.access: who may see which job and its outputs; outsiders get 404 and learn nothing."""

import pytest
from django.http import Http404

from jobs.access import output_for
from tests.factories import store_output, submit_job


@pytest.fixture
def output(member, team, image):
    return store_output(submit_job(member, team, image=image), "model.json", b"{}")


def test_an_output_is_found_with_its_job_in_two_queries(member, output, django_assert_num_queries):
    with django_assert_num_queries(2):  # the job among the member's teams', then its output
        found = output_for(member, output.job_id, "model.json")
        assert found.job.team.slug and found.job.image.name

    assert found == output


def test_an_outsider_is_told_there_is_no_such_job(outsider, output):
    with pytest.raises(Http404, match="No such job"):
        output_for(outsider, output.job_id, "model.json")


@pytest.mark.parametrize("job_id", [None, "not-an-id", "00000000-0000-0000-0000-000000000000"])
def test_a_missing_or_malformed_job_is_404(member, job_id):
    with pytest.raises(Http404, match="No such job"):
        output_for(member, job_id, "model.json")


def test_a_path_the_job_has_not_is_404(member, output):
    with pytest.raises(Http404):
        output_for(member, output.job_id, "other.json")
