import shlex

from django.contrib.auth.models import User

from jobs.models import Job
from jobtemplates.models import JobTemplate, literal


class CommandTooLong(ValueError):
    """The job's command, quoted as a template's command line, is longer than a template may hold."""


def save_as_template(job: Job, *, user: User, name: str = "") -> JobTemplate:
    """A template of the job's team with its work and request as defaults, braces doubled so it runs the same argv."""
    command = shlex.join(literal(argument) for argument in job.command)
    if len(command) > (most := JobTemplate._meta.get_field("command").max_length or 0):
        raise CommandTooLong(f"its command, written as a template's, is {len(command)} characters; at most {most}.")
    return JobTemplate.objects.create(
        team=job.team,
        name=(name or job.name)[:200],
        description=f"Saved from job {job.name} ({job.pk}) by {user.username}."[:500],
        image=job.image,
        command=command,
        defaults={},
        env=job.env,
        output_patterns=job.output_patterns,
        cpus=job.cpus,
        memory_mb=job.memory_mb,
        gpus=job.gpus,
        time_limit_s=job.time_limit_s,
        created_by=user,
    )
