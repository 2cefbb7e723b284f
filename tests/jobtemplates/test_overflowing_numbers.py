"""A template's run form with numbers past what the job's columns keep, or past the template's own bounds: a 400
with the error at the field, one bound said, never a 500; an id past a bigint is 404 as any id no template has."""

import pytest

from jobs.models import Job
from jobtemplates.models import JobTemplate
from tests.factories import RuntimeImageFactory

INT_MAX, SMALL_MAX = 2_147_483_647, 32_767


@pytest.fixture
def me(client, member):
    client.force_login(member)
    return client


@pytest.fixture
def open_template(db, team, member):
    """A team template that sets no most of its own."""
    image = RuntimeImageFactory(name="busybox")
    return JobTemplate.objects.create(team=team, name="open", image=image, command="true", created_by=member)


def run(me, template, **fields):
    data = {"name": "n", "cpus": 1, "memory_mb": 64, "gpus": 0, "time_limit_s": 60, **fields}
    return me.post(f"/templates/{template.pk}/", data)


@pytest.mark.parametrize(
    ("field", "value", "most"),
    [("cpus", 10**30, SMALL_MAX), ("gpus", SMALL_MAX + 1, SMALL_MAX), ("memory_mb", 2**63, INT_MAX),
     ("time_limit_s", INT_MAX + 1, INT_MAX)],
)  # fmt: skip
def test_a_number_past_its_column_is_a_400_at_its_field(me, open_template, local_node, field, value, most):
    response = run(me, open_template, **{field: str(value)})

    assert response.status_code == 400
    assert response.context["form"].errors == {field: [f"Ensure this value is less than or equal to {most}."]}
    assert f"Ensure this value is less than or equal to {most}." in response.content.decode()
    assert not Job.objects.exists()


@pytest.mark.parametrize("cpus", [3, 10**30])
def test_past_the_templates_own_most_says_that_bound_alone(me, open_template, local_node, cpus):
    JobTemplate.objects.filter(pk=open_template.pk).update(cpus_max=2)

    response = run(me, open_template, cpus=str(cpus))

    assert response.status_code == 400
    assert response.context["form"].errors == {"cpus": ["Ensure this value is less than or equal to 2."]}


def test_a_template_id_past_a_bigint_is_404(me):
    assert me.get(f"/templates/{2**63}/").status_code == 404
    assert me.post(f"/templates/{10**30}/", {"name": "n"}).status_code == 404
