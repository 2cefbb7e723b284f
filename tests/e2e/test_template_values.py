"""A template's value on the real stack (HTTP, PostgreSQL, a real Celery worker process, a real container):
it reaches the program as one argument, exactly as typed, and no shell runs it; a template that put the
value inside a shell script is refused before anything runs."""

import pytest

from jobs.models import Job
from jobtemplates.models import JobTemplate
from tests.conftest import wait_for_release

pytestmark = [pytest.mark.docker, pytest.mark.celery]

# Command substitution, quotes of both kinds, spaces and a line break: each would split or run in a shell.
VALUE = "$(id -u) `id` 'single' \"double\"  two spaces\nline two; echo INJECTED"


def run(client, template, value: str):
    return client.post(f"/templates/{template.pk}/", {
        "name": "values", "param_msg": value, "cpus": 1, "memory_mb": 64, "gpus": 0, "time_limit_s": 60,
    })  # fmt: skip


def test_a_value_arrives_as_one_argument_and_no_shell_runs_it(stack, client, member, images):
    client.force_login(member)
    # The script writes how many arguments it has, then each between brackets: the value is its "$1".
    template = JobTemplate.objects.create(
        name="echo", image=images["busybox"], output_patterns=["args.txt"],
        command="""sh -c '{ echo "$#"; printf "[%s]\\n" "$@"; } > /output/args.txt' sh {msg}""",
    )  # fmt: skip

    response = run(client, template, VALUE)

    assert response.status_code == 302, response.content.decode()
    job = wait_for_release(Job.objects.get())
    assert job.outcome == "succeeded", job.reason
    assert job.command[-1] == VALUE
    client_response = client.get(f"/jobs/{job.pk}/outputs/args.txt")
    written = b"".join(client_response.streaming_content).decode()
    assert written == f"1\n[{VALUE}]\n"  # one argument, byte for byte: nothing substituted, split or run


def test_the_attack_template_is_refused_before_anything_runs(stack, client, member, images):
    client.force_login(member)
    attack = JobTemplate.objects.create(name="hello", image=images["busybox"], command="sh -c 'echo hello {msg}'")

    response = run(client, attack, "$(id -u)")

    assert response.status_code == 400 and "This template cannot run" in response.content.decode()
    assert not Job.objects.exists()
