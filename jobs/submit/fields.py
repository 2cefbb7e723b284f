"""The fields of a submission that tie it to others and say when to run it again: dependencies (after_ok,
after_any, after_not_ok), inputs_from, and the retry rules; each checked against the job's team."""

import re
import uuid
from typing import Any

from django import forms

from jobs.lifecycle.retries import RETRYABLE
from jobs.models import Dependency, Job, JobArray
from teams.models import Team

SEPARATORS = re.compile(r"[\s,]+")
EXIT_CODE = re.compile(r"[0-9]{1,3}")  # ASCII and short: int() of thousands of digits raises, of "²" too
MAX_VALUES = 100  # ids (or inputs, or retry rules) a field takes at most
MAX_GLOB_CHARS = 512
MAX_MEMORY_FACTOR = 16
DEPENDENCY_FIELDS = {
    "after_ok": Dependency.Kind.OK,
    "after_any": Dependency.Kind.ANY,
    "after_not_ok": Dependency.Kind.NOT_OK,
}


class RepeatedInput(forms.TextInput):
    """One text box in the browser; the API sends the field once per value (repeated, or a JSON list)."""

    def value_from_datadict(self, data: Any, files: Any, name: str) -> Any:
        return data.getlist(name) if hasattr(data, "getlist") else data.get(name)

    def format_value(self, value: Any) -> str | None:
        return ", ".join(str(v) for v in value) if isinstance(value, list) else super().format_value(value)


class RepeatedField(forms.Field):
    """Values sent once each, or several in one value separated by `separators` (the browser's box)."""

    widget = RepeatedInput
    separators = SEPARATORS

    def to_python(self, value: Any) -> list[str]:
        values = [value] if isinstance(value, (str, int)) else value or []
        if not isinstance(values, list) or not all(isinstance(v, (str, int)) for v in values):
            raise forms.ValidationError("Must be a list of strings.")
        found = [part for v in values for part in self.separators.split(str(v).strip()) if part]
        if len(found) > MAX_VALUES:
            raise forms.ValidationError(f"At most {MAX_VALUES} values.")
        return found

    def schema(self, most: int | None = None) -> dict[str, Any]:
        return {"type": "array", "items": {"type": "string"}, "maxItems": MAX_VALUES}


class DependencyField(RepeatedField):
    def to_python(self, value: Any) -> list[str]:
        found = super().to_python(value)
        for text in found:
            try:
                uuid.UUID(text)
            except ValueError:
                raise forms.ValidationError(f"{text!r} is not the id of a job or an array.") from None
        return found


class InputsField(RepeatedField):
    """`<job id>:<glob>`, one a value (a line, in the browser's box)."""

    separators = re.compile(r"\n+")

    def to_python(self, value: Any) -> list[str]:
        found = super().to_python(value)
        for text in found:
            job_id, colon, glob = text.strip().partition(":")
            if not colon or not glob.strip():
                raise forms.ValidationError(f"{text!r}: write the job's id, a colon and a glob, such as <id>:*.csv.")
            _id(job_id.strip(), text)
            if glob.startswith("/") or ".." in glob.split("/") or "\x00" in glob or len(glob) > MAX_GLOB_CHARS:
                raise forms.ValidationError(f"{glob!r} must be a pattern relative to the job's outputs, without '..'.")
        return [text.strip() for text in found]


class RetryOnField(RepeatedField):
    def to_python(self, value: Any) -> list[str]:
        found = super().to_python(value)
        for rule in found:
            if rule not in RETRYABLE and not (EXIT_CODE.fullmatch(rule) and int(rule) <= 255):
                raise forms.ValidationError(
                    f"{rule!r} is neither an exit code (0 to 255) nor one of {', '.join(RETRYABLE)}."
                )
        return list(dict.fromkeys(found))


def _id(text: str, whole: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise forms.ValidationError(f"{whole!r}: {text!r} is not the id of a job.") from None


def clean_chain(form: forms.Form, cleaned: dict[str, Any], team: Team | None) -> None:
    """Turn the ids into the team's jobs and arrays (cleaned `after`, `inputs`): an unknown id, or one of
    another team, is an error of its field that names it."""
    named = {name: cleaned.get(name) or [] for name in DEPENDENCY_FIELDS}
    sources = [text.partition(":")[::2] for text in cleaned.get("inputs_from") or []]
    cleaned["after"], cleaned["inputs"] = [], []
    if team is None:
        return
    ids = {uuid.UUID(t) for values in named.values() for t in values} | {uuid.UUID(s[0]) for s in sources}
    if not ids:
        return
    jobs = Job.objects.filter(team=team).in_bulk(list(ids))
    arrays = JobArray.objects.filter(team=team).in_bulk(list(ids - set(jobs)))
    for name, kind in DEPENDENCY_FIELDS.items():
        for text in named[name]:
            upstream = jobs.get(uuid.UUID(text)) or arrays.get(uuid.UUID(text))
            if upstream is None:
                form.add_error(name, f"No job or array of team {team.slug} has the id {text}.")
            else:
                cleaned["after"].append((kind, upstream))
    for job_id, glob in sources:
        source = jobs.get(uuid.UUID(job_id))
        if source is None:
            form.add_error("inputs_from", f"No job of team {team.slug} has the id {job_id}.")
        else:
            cleaned["inputs"].append((source, glob.strip()))
