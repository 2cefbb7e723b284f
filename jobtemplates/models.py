"""A job template: the work and the request of a job, with named parameters in its command
(`python3 /data/train.py --epochs {epochs}`), defaults and bounds on the resources. A template of no
team is the operators' and every member sees it; a team's template is seen by its members only."""

import re
import shlex

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from core.names import showable_name

PARAMETER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
PARAMETER_VALUE = re.compile(r"^[^\x00\n\r]{0,500}$")


class JobTemplate(models.Model):
    team = models.ForeignKey(
        "teams.Team",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="job_templates",
        help_text="None: an operators' template every team sees.",
    )
    name = models.CharField(max_length=200, validators=[showable_name])
    description = models.CharField(max_length=500, blank=True)
    image = models.ForeignKey("jobs.RuntimeImage", on_delete=models.PROTECT, related_name="templates")
    command = models.CharField(
        max_length=8192,
        help_text="A shell-style command line; {name} is a parameter the member fills in (each value is one "
        "shell word: it is quoted).",
    )
    defaults = models.JSONField(default=dict, blank=True, help_text='Default parameter values, e.g. {"epochs": "5"}.')
    env = models.JSONField(default=dict, blank=True)
    output_patterns = models.JSONField(default=list, blank=True)
    # The request: a default and the most a member may ask for (None: only the pool's own limits).
    cpus = models.PositiveSmallIntegerField(default=1)
    cpus_max = models.PositiveSmallIntegerField(null=True, blank=True)
    memory_mb = models.PositiveIntegerField(default=256)
    memory_mb_max = models.PositiveIntegerField(null=True, blank=True)
    gpus = models.PositiveSmallIntegerField(default=0)
    gpus_max = models.PositiveSmallIntegerField(null=True, blank=True)
    time_limit_s = models.PositiveIntegerField(default=600)
    time_limit_s_max = models.PositiveIntegerField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "id"]
        indexes = [models.Index(fields=["team", "name"])]

    def __str__(self) -> str:
        return self.name

    @property
    def parameters(self) -> list[str]:
        """The parameters' names, in the order the command first names them."""
        return list(dict.fromkeys(PARAMETER.findall(self.command)))

    def clean(self) -> None:
        for field in ("cpus", "memory_mb", "gpus", "time_limit_s"):
            most = getattr(self, f"{field}_max")
            if most is not None and getattr(self, field) > most:
                raise ValidationError({field: f"The default is over the most allowed ({most})."})
        if not isinstance(self.defaults, dict) or not all(isinstance(v, str) for v in self.defaults.values()):
            raise ValidationError({"defaults": "A JSON object of parameter names to strings."})
        unknown = set(self.defaults) - set(self.parameters)
        if unknown:
            raise ValidationError({"defaults": f"Not a parameter of the command: {', '.join(sorted(unknown))}."})

    def command_line(self, values: dict[str, str]) -> str:
        """The command with each parameter replaced by its value as one quoted shell word, so a value
        can never add an argument or end the command: JobForm then splits it as typed."""
        return PARAMETER.sub(lambda m: shlex.quote(values[m.group(1)]), self.command)
