"""Job templates: a `{name}` alone as an argument becomes the value, whole; inside one (maybe a script) it is refused.

`{{` and `}}` are literal braces (docs/reference/templates.md).
"""

import re
import shlex

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from core.names import showable_name
from core.when import duration_bounds
from jobs.lifecycle.retries import RETRYABLE
from jobs.submit.fields import EXIT_CODE, MAX_MEMORY_FACTOR
from jobs.submit.indices import BadIndices, parse_indices

# A /data/<name> path in an argument (also inside a script): not part of a longer path such as /mnt/data/x.
DATA_PATH = re.compile(r"(?<![\w/.-])/data/([A-Za-z0-9._+-]+)")
PARAMETER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
# In an argument that is not a parameter: a doubled (literal) brace, or a parameter, refused there.
IN_ARGUMENT = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
MAX_VALUE_CHARS = 500


class BadCommand(ValueError):
    """A command that does not split, or has a parameter inside an argument."""


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
        help_text="A shell-style command line, split into arguments as typed. {name} standing alone as an "
        "argument is a parameter the member fills in: the value becomes that whole argument as typed, never "
        "split and never read by a shell. A {name} inside a longer argument is refused (in a shell script "
        "it would be run): pass it as a positional parameter, sh -c 'echo hello \"$1\"' sh {msg}. "
        "A brace written twice is one literal brace.",
    )
    defaults = models.JSONField(default=dict, blank=True, help_text='Default parameter values, e.g. {"epochs": "5"}.')
    env = models.JSONField(default=dict, blank=True)
    output_patterns = models.JSONField(default=list, blank=True)
    # A default and the most a member may ask for (None: only the pool's own limits).
    cpus = models.PositiveSmallIntegerField(default=1)
    cpus_max = models.PositiveSmallIntegerField(null=True, blank=True)
    memory_mb = models.PositiveIntegerField(default=256)
    memory_mb_max = models.PositiveIntegerField(null=True, blank=True)
    gpus = models.PositiveSmallIntegerField(default=0)
    gpus_max = models.PositiveSmallIntegerField(null=True, blank=True)
    time_limit_s = models.PositiveIntegerField(default=600)
    time_limit_s_max = models.PositiveIntegerField(null=True, blank=True)
    # Presets of the run form, each changeable there. Not dependencies: the ids they name change each night.
    array_indices = models.CharField(
        max_length=10000, blank=True, help_text="Run as an array of one task per index: 0-99, 1,3,5-7 or 0-20:5."
    )
    max_running = models.PositiveIntegerField(
        null=True, blank=True, help_text="An array's tasks that hold compute at once; empty: as many as the pool gives."
    )
    max_retries = models.PositiveSmallIntegerField(default=0)
    retry_on = models.JSONField(
        default=list, blank=True, help_text='Exit codes or outcomes, e.g. ["137", "out_of_memory"]; empty: node_lost.'
    )
    retry_memory_factor = models.FloatField(
        default=1.0, validators=[MinValueValidator(1.0), MaxValueValidator(MAX_MEMORY_FACTOR)]
    )
    retry_delay_s = models.PositiveIntegerField(default=0, help_text="Before the first retry, doubling each one after.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "id"]
        indexes = [models.Index(fields=["team", "name"])]

    def __str__(self) -> str:
        return self.name

    def arguments(self) -> list[str]:
        """The command split as typed, parameters in place, else BadCommand."""
        try:
            arguments = shlex.split(self.command)
        except ValueError as exc:
            raise BadCommand(f"The command does not split into arguments: {exc}.") from None
        for argument in arguments:
            if PARAMETER.fullmatch(argument):
                continue
            inside = [m.group(0) for m in IN_ARGUMENT.finditer(argument) if m.group(1)]
            if inside:
                raise BadCommand(
                    f"{inside[0]} is inside the argument {argument!r}: a parameter must be a whole argument, so its "
                    "value is never run as part of a script. In a shell script, pass it as a positional "
                    "parameter: sh -c 'echo hello \"$1\"' sh {msg}. Write a brace twice for a literal one."
                )
        return arguments

    @property
    def parameters(self) -> list[str]:
        """In the command's order; none when it cannot run."""
        try:
            arguments = self.arguments()
        except BadCommand:
            return []
        return list(dict.fromkeys(m.group(1) for a in arguments if (m := PARAMETER.fullmatch(a))))

    def clean(self) -> None:
        try:
            self.arguments()
        except BadCommand as exc:
            raise ValidationError({"command": str(exc)}) from None
        for field in ("cpus", "memory_mb", "gpus", "time_limit_s"):
            most = getattr(self, f"{field}_max")
            if most is not None and getattr(self, field) > most:
                raise ValidationError({field: f"The default is over the most allowed ({most})."})
        if not isinstance(self.defaults, dict) or not all(isinstance(v, str) for v in self.defaults.values()):
            raise ValidationError({"defaults": "A JSON object of parameter names to strings."})
        unknown = set(self.defaults) - set(self.parameters)
        if unknown:
            raise ValidationError({"defaults": f"Not a parameter of the command: {', '.join(sorted(unknown))}."})
        self._clean_presets()

    def _clean_presets(self) -> None:
        """The presets as a run's form checks them (jobs.submit.forms.ArrayForm), so a run starts valid."""
        if self.array_indices.strip():
            try:
                parse_indices(self.array_indices, most=settings.E31_ARRAY_MAX_TASKS)
            except BadIndices as exc:
                raise ValidationError({"array_indices": str(exc)}) from None
        if self.max_running is not None and self.max_running < 1:
            raise ValidationError({"max_running": "At least 1, or empty."})
        if self.max_retries > (most := settings.E31_MAX_RETRIES):
            raise ValidationError({"max_retries": f"At most {most}."})
        if self.retry_delay_s > (most := duration_bounds("retry_delay_s")[1]):
            raise ValidationError({"retry_delay_s": f"At most {most} seconds."})
        rules = self.retry_on
        if not isinstance(rules, list) or not all(
            isinstance(r, str) and (r in RETRYABLE or (EXIT_CODE.fullmatch(r) and int(r) <= 255)) for r in rules
        ):
            raise ValidationError(
                {"retry_on": f"A JSON list of exit codes (0 to 255) as strings, or of {', '.join(RETRYABLE)}."}
            )

    def data_paths(self) -> list[str]:
        """The /data/<name> the command names, each once (the folder of a deeper path)."""
        try:
            arguments = self.arguments()
        except BadCommand:
            arguments = self.command.split()
        found = (m.group(1).rstrip(".") for a in arguments for m in DATA_PATH.finditer(a))
        return list(dict.fromkeys(name for name in found if name))

    def missing_data(self, names: list[str] | None = None) -> list[str]:
        """The /data/<name> the command names that the template has no file of."""
        have = set(names if names is not None else self.files.values_list("name", flat=True))
        return [name for name in self.data_paths() if name not in have]

    def argv(self, values: dict[str, str]) -> list[str]:
        """The job's arguments: each parameter replaced by its value, whole; elsewhere a doubled brace is one."""
        return [
            values[m.group(1)] if (m := PARAMETER.fullmatch(a)) else IN_ARGUMENT.sub(lambda b: b.group(0)[0], a)
            for a in self.arguments()
        ]


def literal(argument: str) -> str:
    """Braces doubled: an argument as a template's command writes it to stay as it is."""
    return argument.replace("{", "{{").replace("}", "}}")


class TemplateFile(models.Model):
    """Staged at /data/<name> for every run: a stored blob of the team's, named by each run rather than copied."""

    template = models.ForeignKey(JobTemplate, on_delete=models.CASCADE, related_name="files", db_index=False)
    name = models.CharField(max_length=255)
    blob = models.ForeignKey("jobs.StoredBlob", on_delete=models.PROTECT, related_name="template_files")
    added_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["template", "name"], name="template_file_names_unique")]

    def __str__(self) -> str:
        return f"{self.template_id}: {self.name}"
