"""Saving a job as a template of its team."""

import shlex

from django.contrib.auth.models import User

from jobs.models import Job
from jobtemplates.models import PARAMETER, JobTemplate


def save_as_template(job: Job, *, user: User, name: str = "") -> JobTemplate:
    """A template of the job's team with the job's work and request as defaults (no bounds beyond the
    pool's). Braces the job's command had that look like a parameter ({x}) stay a parameter whose
    default is the same text, so the template runs the same command as typed."""
    command = shlex.join(job.command)
    return JobTemplate.objects.create(
        team=job.team,
        name=(name or job.name)[:200],
        description=f"Saved from job {job.name} ({job.pk}) by {user.username}."[:500],
        image=job.image,
        command=command,
        defaults={p: "{" + p + "}" for p in PARAMETER.findall(command)},
        env=job.env,
        output_patterns=job.output_patterns,
        cpus=job.cpus,
        memory_mb=job.memory_mb,
        gpus=job.gpus,
        time_limit_s=job.time_limit_s,
        created_by=user,
    )
