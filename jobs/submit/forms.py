"""The submission form: the one validator of a job declaration, for the browser and the API alike."""

import json
import re
import shlex
from typing import Any, cast

from django import forms
from django.conf import settings
from django.contrib.auth.models import User
from django.core.files.base import File
from django.core.files.uploadedfile import UploadedFile
from django.core.validators import MaxValueValidator
from django.utils import timezone
from django.utils.choices import CallableChoiceIterator

from core import json_text
from core.bounds import column_bounds, narrow
from core.names import showable_name
from core.refusals import Refused, on_form
from core.when import BAD_DURATION, COLUMN_MOST, BadDuration, duration_bounds, read_duration
from jobs.lifecycle.isolation_levels import isolation_of, strong_required_by
from jobs.models import DEFAULT_RETRY_ON, Isolation, Job, JobArray, RuntimeImage, StoredBlob
from jobs.storage.blobs import BlobGone
from jobs.storage.store import BadFileName, open_file, sanitize_name
from jobs.submit.arrays import ArrayRequest
from jobs.submit.declaration import Declaration
from jobs.submit.fields import MAX_MEMORY_FACTOR, DependencyField, InputsField, RetryOnField, clean_chain
from jobs.submit.indices import BadIndices, parse_indices
from jobs.submit.scripts import MAX_SCRIPT_CHARS, script_argv
from jobs.submit.service import submit
from pool.features import BadConstraint
from pool.models import Queue
from pool.nodes import check_constraint, pool_nodes
from pool.placement.backfill import never_fits
from pool.placement.reasons import reason_text
from pool.placement.types import Request
from pool.queues import Refusal, may_use, queue_for, refusals
from teams.access import AnyUser, chosen_team, teams_of
from teams.models import Team

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # matched whole (fullmatch): `$` lets a final newline through
MAX_ENV_BYTES = 64 * 1024
BLANK_LINES_BEFORE = re.compile(r"\A(?:[ \t]*\n)+")
MAX_OUTPUT_PATTERNS = 100
MAX_PATTERN_CHARS = 512
POOL_VIEW_MAX_AGE_S = 5.0  # how late the form may be in seeing a node come or go (pool.nodes.pool_nodes)
AMOUNTS = ("cpus", "memory_mb", "gpus")  # what a node must have for the job: checked against the pool together


class OneValue(forms.Field):
    """A field sent once: a JSON body's list or object is refused before it is read as text."""

    def to_python(self, value: Any) -> Any:
        if isinstance(value, (list, dict)):
            raise forms.ValidationError("Must be a string or a number.")
        return super().to_python(value)

    def schema(self, most: int | None = None) -> dict[str, Any]:
        """The value in OpenAPI terms (jobs.api.serializers.submission_schema): each field of JobForm says its own."""
        schema: dict[str, Any] = {"type": "string"}
        # The choices of team and image depend on the caller and the registry (set per form); fixed ones are listed.
        if fixed := [value for value, _ in getattr(self, "choices", []) if value]:
            schema["enum"] = fixed
        if max_length := getattr(self, "max_length", None):
            schema["maxLength"] = max_length
        return schema | ({"minLength": 1} if self.required else {})


class TextField(OneValue, forms.CharField):
    pass


class ChoiceField(OneValue, forms.ChoiceField):
    pass


class IntegerField(OneValue, forms.IntegerField):
    # A text box, not type=number: a browser sends a number box holding "abc" as empty, which the form
    # would then call missing instead of saying it is not a number.
    widget = forms.TextInput(attrs={"inputmode": "numeric"})

    def clean(self, value: Any) -> int:
        cleaned = super().clean(value)
        return self.initial if cleaned is None else cleaned  # one not required, left out: its initial value

    def schema(self, most: int | None = None) -> dict[str, Any]:
        schema = {"type": "integer", "minimum": self.min_value}
        if bounds := [bound for bound in (self.max_value, most) if bound is not None]:
            schema["maximum"] = min(bounds)  # a setting's limit, when it is under the column's
        return schema


class AmountField(IntegerField):
    """A part of the request a node must have. Its bound (max_value) is checked by JobForm.clean after
    the pool is: an amount no node has is said so ("can never be held"), not as over the bound."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators = [v for v in self.validators if not isinstance(v, MaxValueValidator)]

    def over_bound(self, value: int) -> forms.ValidationError | None:
        if self.max_value is None or value <= self.max_value:
            return None
        return forms.ValidationError(
            MaxValueValidator.message, code="max_value", params={"limit_value": self.max_value}
        )


class FlagField(OneValue, forms.Field):
    """Yes or no: true/false (also 1/0, yes/no) as text or a JSON boolean; left out, its initial value."""

    widget = forms.Select(choices=[("", "yes (default)"), ("false", "no")])
    TRUE, FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")

    def to_python(self, value: Any) -> bool:
        value = super().to_python(value)
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower() if value is not None else ""
        if not text:
            return bool(self.initial)
        if text in self.TRUE or text in self.FALSE:
            return text in self.TRUE
        raise forms.ValidationError("Must be true or false.", code="invalid")

    def schema(self, most: int | None = None) -> dict[str, Any]:
        return {"type": "boolean"}


class FloatField(OneValue, forms.FloatField):
    widget = forms.TextInput(attrs={"inputmode": "decimal"})

    def clean(self, value: Any) -> float:
        cleaned = super().clean(value)
        return self.initial if cleaned is None else cleaned

    def schema(self, most: int | None = None) -> dict[str, Any]:
        return {"type": "number", "minimum": self.min_value, "maximum": self.max_value}


class DurationField(IntegerField):
    """A whole number of seconds, also written with units, read within the field's bounds by core.when's one
    reader (read_duration); shown back as typed."""

    widget = forms.TextInput(attrs={"inputmode": "text", "autocomplete": "off"})
    default_error_messages = {"invalid": BAD_DURATION}

    def to_python(self, value: Any) -> int | None:
        if value in self.empty_values or isinstance(value, (list, dict)):
            return super().to_python(value)
        try:
            return read_duration(value, least=self.min_value or 0, most=self.max_value or COLUMN_MOST)
        except BadDuration as exc:
            raise forms.ValidationError(exc.message, code=exc.code) from None

    def widget_attrs(self, widget: forms.Widget) -> dict[str, Any]:
        return {}  # no min/max: the text may carry units


class CommandInput(forms.TextInput):
    """One text box in the browser; a form body may send the argv one value an argument (`-F command=sh -F
    command=-c …`), as a JSON body sends its list: one value stays a line to read."""

    def value_from_datadict(self, data: Any, files: Any, name: str) -> Any:
        if not hasattr(data, "getlist"):
            return data.get(name)
        values = data.getlist(name)
        return values if len(values) > 1 else next(iter(values), None)


class CommandField(TextField):
    """An argv: text (a JSON list or a shell-style line), or the list itself (a JSON body's, or repeated values)."""

    widget = CommandInput

    def clean(self, value: Any) -> list[str]:
        if isinstance(value, dict):
            raise forms.ValidationError("Must be a string or a JSON list.")
        if isinstance(value, list):
            argv = value
            self.run_validators(json.dumps(argv))  # bounded as the same list sent as text is
        elif not (text := super().clean(value)):
            return []  # none given: JobForm.clean asks for a command or a script
        else:
            try:
                argv = json_text.parse(text) if text.startswith("[") else shlex.split(text)
            except ValueError as exc:  # json.JSONDecodeError is one
                raise forms.ValidationError(f"Cannot parse the command: {exc}") from None
        if not argv or not all(isinstance(a, str) for a in argv):
            raise forms.ValidationError("The command must be a non-empty list of strings.")
        if any("\x00" in a for a in argv):
            raise forms.ValidationError("The command must not contain NUL bytes.")
        if not json_text.is_unicode(argv):
            raise forms.ValidationError("The command must be Unicode text: it holds a lone surrogate.")
        return argv

    def schema(self, most: int | None = None) -> dict[str, Any]:
        return {"oneOf": [super().schema(), {"type": "array", "items": {"type": "string"}, "minItems": 1}]}


class ScriptField(TextField):
    """A script of several lines, run as JobForm.clean says (jobs.submit.scripts.script_argv)."""

    def clean(self, value: Any) -> str:
        # A browser sends a textarea's line breaks as CRLF: sh would read each line's CR as part of it.
        script = super().clean(value).replace("\r\n", "\n").replace("\r", "\n")
        script = BLANK_LINES_BEFORE.sub("", script).rstrip()  # so its first line is the one that may be a shebang
        if not json_text.is_unicode(script):
            raise forms.ValidationError("The script must be Unicode text: it holds a lone surrogate.")
        return script


class EnvField(TextField):
    """Environment variables: a JSON object as text, or in a JSON body the object itself."""

    def clean(self, value: Any) -> dict[str, str]:
        if isinstance(value, list):
            raise forms.ValidationError("Must be a string or a JSON object.")
        if isinstance(value, dict):
            env = value
            self.run_validators(json.dumps(env))  # bounded as the same object sent as text is
        elif not (text := super().clean(value)):
            return {}
        else:
            try:
                env = json_text.parse(text)
            except ValueError as exc:  # json.JSONDecodeError is one
                raise forms.ValidationError(f"Not valid JSON: {exc}") from None
        if not isinstance(env, dict) or not json_text.is_unicode(env):
            raise forms.ValidationError("The environment must be a JSON object of names to strings.")
        for key, item in env.items():
            if not ENV_NAME.fullmatch(key):
                raise forms.ValidationError(f"{key!r} is not a valid variable name.")
            if not isinstance(item, str) or "\x00" in item:
                raise forms.ValidationError(f"The value of {key} must be a string.")
        return env

    def schema(self, most: int | None = None) -> dict[str, Any]:
        return {"oneOf": [super().schema(), {"type": "object", "additionalProperties": {"type": "string"}}]}


class PatternLines(forms.Textarea):
    """The browser's box of patterns, one a line; the API sends them one a value (repeated, or a JSON list)."""

    def value_from_datadict(self, data: Any, files: Any, name: str) -> Any:
        return data.getlist(name) if hasattr(data, "getlist") else data.get(name)

    def format_value(self, value: Any) -> str | None:
        return "\n".join(value) if isinstance(value, list) else super().format_value(value)


class PatternsField(forms.Field):
    """Output patterns: each line of each value sent is one."""

    widget = PatternLines

    def clean(self, value: Any) -> list[str]:
        values = [value] if isinstance(value, str) else value or []
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise forms.ValidationError("Output patterns must be a list of strings.")
        patterns = [line.strip() for v in values for line in v.splitlines() if line.strip()]
        bad = [  # every bad pattern is named, not only the first
            forms.ValidationError(f"{p!r} must be a pattern relative to /output, without '..'.")
            for p in patterns
            if p.startswith("/") or ".." in p.split("/") or "\x00" in p or len(p) > MAX_PATTERN_CHARS
        ]
        if len(patterns) > MAX_OUTPUT_PATTERNS:
            bad.append(forms.ValidationError(f"At most {MAX_OUTPUT_PATTERNS} output patterns."))
        if bad:
            raise forms.ValidationError(bad)
        return patterns

    def schema(self, most: int | None = None) -> dict[str, Any]:
        return {"type": "array", "items": {"type": "string", "maxLength": MAX_PATTERN_CHARS}, "maxItems": most}


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    widget = MultipleFileInput

    def clean(self, data: Any, initial: Any = None) -> list[UploadedFile]:
        files = data if isinstance(data, (list, tuple)) else ([data] if data else [])
        return [super(MultipleFileField, self).clean(f, initial) for f in files]

    def schema(self, most: int | None = None) -> dict[str, Any]:
        return {"type": "array", "items": {"type": "string", "format": "binary"}, "maxItems": most}


class SubmittingForm(forms.Form):
    """A form that declares a job (declaration(), and an array's array_request()) and submits it as its user
    through jobs.submit.service.submit: a refusal becomes the form's error and None, its status
    refused_status (core.refusals.Refused.status: 402 over budget, 413 over quota, 409 a file gone)."""

    user: AnyUser
    refused_status = 400  # until a submission is refused

    def declaration(self) -> Declaration:
        raise NotImplementedError

    def array_request(self) -> ArrayRequest:
        raise NotImplementedError

    def submit(self, *, key: str) -> tuple[Job, bool] | None:
        """Submit what the form declares; (job, created), or None refused. `key` names this sending of the
        form (a double click sends it twice), the declaration's fingerprint added so the form sent again with
        other values is a new job."""
        assert isinstance(self.user, User), "a form is submitted by someone signed in"
        declaration = self.declaration()
        try:
            return submit(declaration, user=self.user, idempotency_key=f"{key}:{declaration.fingerprint}")
        except Refused as refused:
            self._refused(refused)
            return None

    def submit_array(self, *, key: str = "") -> JobArray | None:
        """Submit the array the form declares; None refused. `key`: its idempotency key
        (jobs.web.views.array_key, for the browser's form sent twice)."""
        assert isinstance(self.user, User), "a form is submitted by someone signed in"
        try:
            array, _created = submit(
                self.declaration(), user=self.user, idempotency_key=key, array=self.array_request()
            )
            return array
        except Refused as refused:
            self._refused(refused)
            return None

    def _refused(self, refused: Refused) -> None:
        """The refusal as this form's error (core.refusals.on_form), and the status its page answers with."""
        self.refused_status = on_form(self, refused)


class JobForm(SubmittingForm):
    """A job's fields and rules, for the browser's form and the API alike: each field also takes the
    API's form of its value and says its own part of the OpenAPI document (`schema`)."""

    team = ChoiceField(required=False, help_text="The team the job runs for; needed when you are in more than one.")
    name = TextField(max_length=200, validators=[showable_name])
    image = ChoiceField(help_text="A registered runtime image.")
    command = CommandField(
        required=False,
        max_length=8192,
        help_text='A shell-style command line, or a JSON list such as ["python3", "/data/train.py"]; '
        "or leave it empty and write a script below.",
    )
    script = ScriptField(
        required=False,
        strip=False,  # a script's indentation is its own; blank lines around it are dropped (ScriptField.clean)
        max_length=MAX_SCRIPT_CHARS,
        widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false", "autocomplete": "off", "class": "script"}),
        help_text="Instead of a command: lines run with sh -c, or with python3 -c when the first line is a "
        "python shebang such as #!/usr/bin/env python3.",
    )
    env = EnvField(
        required=False, max_length=MAX_ENV_BYTES, label="Environment", help_text='A JSON object, e.g. {"EPOCHS": "5"}.'
    )
    cpus = AmountField(
        min_value=1,
        max_value=256,
        initial=1,
        label="CPUs",
        error_messages={"invalid": "Enter a whole number of CPUs, such as 2."},
    )
    memory_mb = AmountField(
        min_value=16,
        max_value=4 * 1024 * 1024,
        initial=256,
        label="Memory (MB)",
        error_messages={"invalid": "Enter a whole number of MB, such as 512."},
    )
    gpus = AmountField(
        min_value=0,
        max_value=64,
        initial=0,
        required=False,
        label="GPUs",
        error_messages={"invalid": "Enter a whole number of GPUs, such as 1."},
    )
    time_limit_s = DurationField(
        **column_bounds(Job, "time_limit_s", least=1), initial=600, label="Time limit",
        help_text="Seconds, with units (90m, 2h, 1h30m), or as Slurm writes it (1:30:00, 2-12).",
    )  # fmt: skip
    max_retries = IntegerField(
        **column_bounds(Job, "max_retries"), initial=0, required=False, label="Retries",
        help_text="Times the job goes back to the queue when it ends as the retry rules name (by default, when "
        "its node is lost).",
        error_messages={"invalid": "Enter a whole number of retries, such as 2."},
    )  # fmt: skip
    retry_on = RetryOnField(
        required=False, label="Retry on",
        help_text="Exit codes, or failed, out_of_memory, timed_out, node_lost (separated by commas); "
        "none: node_lost.",
    )  # fmt: skip
    retry_memory_factor = FloatField(
        min_value=1, max_value=MAX_MEMORY_FACTOR, initial=1.0, required=False, label="Memory factor on retry",
        help_text="After running out of memory, the next attempt asks for this much more (capped by the "
        "largest node).",
        error_messages={"invalid": "Enter a number such as 2 or 1.5."},
    )  # fmt: skip
    retry_delay_s = DurationField(
        **column_bounds(Job, "retry_delay_s"), initial=0, required=False, label="Retry delay",
        help_text="Before the first retry (doubling each one after): seconds, or with units such as 5m.",
    )  # fmt: skip
    after_ok = DependencyField(
        required=False, label="After success of", help_text="Ids of jobs or arrays of the team this job waits for."
    )
    after_any = DependencyField(required=False, label="After the end of")
    after_not_ok = DependencyField(required=False, label="After the failure of")
    inputs_from = InputsField(
        required=False, label="Inputs from earlier jobs",
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "<job id>:*.csv"}),
        help_text="<job id>:<glob>, one a line: that job's outputs matching the glob, read-only at "
        "/data/from/<job id>/ (the job waits for it to succeed).",
    )  # fmt: skip
    isolation = ChoiceField(
        required=False,
        choices=[("", "as the team and the image require (standard unless one requires strong)"), *Isolation.choices],
        help_text="strong: the job runs in gVisor, a kernel of its own in user space (slower system calls); "
        "required by some teams and images.",
    )
    queue = TextField(
        required=False, max_length=50, widget=forms.Select,
        help_text="The queue it waits in: a higher one is served first. Empty: the team's default queue.",
    )  # fmt: skip
    constraint = TextField(
        required=False, max_length=200, label="Node features",
        widget=forms.TextInput(attrs={"placeholder": "bigmem&nvme or gpu-h100|gpu-a100", "autocomplete": "off"}),
        help_text="Features its node must have: a&b needs both, a|b either.",
    )  # fmt: skip
    preemptable = FlagField(
        required=False, initial=True,
        help_text="false: a higher queue's job may not stop it to take its cores (only in queues that allow it).",
    )  # fmt: skip
    # The form's metaclass moves declared fields into base_fields, so self.data stays the bound data; the stubs
    # see this field as the class attribute BaseForm.data.
    data = MultipleFileField(  # type: ignore[assignment]
        required=False, allow_empty_file=True, label="Data files", help_text="Files staged read-only at /data/<name>."
    )
    outputs = PatternsField(
        required=False,
        widget=PatternLines(attrs={"rows": 2, "placeholder": "model.json\nreports/"}),
        help_text="Glob patterns relative to /output; none: every file.",
    )

    def __init__(
        self, *args: Any, user: AnyUser, unnamed: list[str] | None = None, reuse_from: Job | None = None, **kwargs: Any
    ) -> None:
        """`unnamed`: the names of files sent that the parser dropped for having no usable name
        (jobs.submit.uploads.unnamed_files), refused here like any other bad name."""
        super().__init__(*args, **kwargs)
        self.user = user
        self.unnamed = unnamed or []
        # With each team's budget, in the same query: the submission checks it (jobs.lifecycle.worst_case).
        self.teams = {t.slug: t for t in teams_of(user).select_related("budget")}
        cast(forms.ChoiceField, self.fields["team"]).choices = [(slug, slug) for slug in self.teams]
        self.images = {i.name: i for i in RuntimeImage.objects.all()}  # one query, also for clean_image
        cast(forms.ChoiceField, self.fields["image"]).choices = [
            (i.name, f"{i.name} — {i.description}") for i in self.images.values()
        ]
        self._offer_queues()
        maxima = self.maxima()
        for name in ("time_limit_s", "max_retries", "retry_delay_s"):
            narrow(cast(forms.IntegerField, self.fields[name]), maxima[name])
        self.reuse_from = reuse_from
        self.reused_blobs: list[tuple[str, StoredBlob]] = []  # the earlier job's blobs named again (_reused_files)
        if reuse_from is not None:  # resubmit: the earlier job's data files, taken from the store
            names = [f.name for f in reuse_from.data_files.all()]
            deleted = reuse_from.files_deleted_at is not None
            self.fields["reuse"] = forms.MultipleChoiceField(
                required=False,
                choices=[(n, n) for n in names],
                initial=[] if deleted else names,
                # Deleted: shown, so the page says which files to attach, but not offered.
                widget=forms.CheckboxSelectMultiple(attrs={"disabled": True} if deleted else {}),
                label="Data files of the earlier job",
                help_text=self._deleted_files(names)
                if deleted
                else "Staged again from the store, without uploading; a file sent by that name replaces it.",
            )

    def _offer_queues(self) -> None:
        """The browser's choice of queue: those some team of the user may use, by priority; read only when the
        page is drawn (the API takes a name)."""
        widget = cast(forms.Select, self.fields["queue"].widget)
        widget.choices = CallableChoiceIterator(self._queue_choices)

    def _queue_choices(self) -> list[tuple[str, str]]:
        teams = list(self.teams.values())
        offered = [q for q in Queue.objects.prefetch_related("teams") if any(may_use(q, t) for t in teams)]
        return [("", "the team's default"), *((q.name, _queue_label(q)) for q in offered)]

    @staticmethod
    def maxima() -> dict[str, int]:
        """Limits the fields do not carry, most from settings (so read as each form or schema is made); one
        past what the field's column keeps does not raise the field's bound (core.bounds.narrow)."""
        return {
            "time_limit_s": duration_bounds("time_limit_s")[1],
            "max_retries": settings.E31_MAX_RETRIES,
            "retry_delay_s": duration_bounds("retry_delay_s")[1],
            "data": settings.E31_UPLOAD_MAX_FILES,
            "outputs": MAX_OUTPUT_PATTERNS,
        }

    def clean_team(self) -> Team:
        return chosen_team(self.teams, self.cleaned_data.get("team"))  # the field offers only the user's teams

    def clean_image(self) -> RuntimeImage:
        return self.images[self.cleaned_data["image"]]  # a choice, so one of those read in __init__

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean()
        self.staged = self._clean_files()
        if cleaned is None:
            return cleaned
        self._clean_command(cleaned)
        self._clean_request(cleaned)
        if "team" in cleaned and "image" in cleaned:
            cleaned["isolation"] = self._isolation(cleaned["team"], cleaned["image"], cleaned.get("isolation") or "")
        clean_chain(self, cleaned, cleaned.get("team"))
        self._clean_policy(cleaned)
        names = [name for name, _ in [*self.staged, *self.reused_blobs]]
        if cleaned["inputs"] and "from" in names:
            self.add_error("data", "A data file named from would hide /data/from/, where inputs_from stages.")
        return cleaned

    def _clean_command(self, cleaned: dict[str, Any]) -> None:
        """The argv: the command's, or the script box's (jobs.submit.scripts.script_argv); exactly one of them."""
        if "command" not in cleaned or "script" not in cleaned:
            return  # one of them is in error already
        command, script = cleaned["command"], cleaned["script"]
        if command and script:
            self.add_error("script", "Give a command or a script, not both: empty one of them.")
        elif script:
            cleaned["command"] = script_argv(script)
        elif not command:
            self.add_error("command", "Give a command, or a script in the script box.")

    def _clean_request(self, cleaned: dict[str, Any]) -> None:
        """Each amount against the pool, then against its field's bound: 999 cpus in a pool of 2-cpu
        nodes can never be held, whatever the bound."""
        asked = {name: cleaned[name] for name in AMOUNTS if name in cleaned}
        if not asked:
            return
        # An amount in error is taken at its least, so each other one is still checked against the nodes.
        least = {name: cast(AmountField, self.fields[name]).min_value or 0 for name in AMOUNTS}
        request = Request(**(least | asked))
        # Every node, as the scheduler pass: an offline node may come back. A request the pool as read a
        # few seconds ago can hold goes through without a query (if the pool has shrunk below it since,
        # the pass rejects it with the same reason); a refusal is only ever said from the pool as it is.
        why = never_fits(request, pool_nodes(max_age_s=POOL_VIEW_MAX_AGE_S))
        if why:
            why = never_fits(request, pool_nodes())
        over = {name: cast(AmountField, self.fields[name]).over_bound(value) for name, value in asked.items()}
        for name, value in asked.items():
            # Marked on each field that alone asks more than any node has; else past its bound.
            if why and value > (most := why.numbers[f"largest_{name}"]):
                self.add_error(name, f"Can never be held: the largest node has {most}.")
            elif (error := over[name]) is not None:
                self.add_error(name, error)
        # Said of the whole request only when it is whole and within the bounds: past one, the field says
        # enough (and a sentence would repeat a number of any length).
        within = not any(over.values())
        if why and len(asked) == len(AMOUNTS) and within:
            self.add_error(None, f"This request can never be held: {reason_text(why)}.")

    def _clean_policy(self, cleaned: dict[str, Any]) -> None:
        """The queue (named, else the team's default) the team may use with this request, and a constraint
        some registered node meets (pool.nodes.check_constraint names the feature none has)."""
        if cleaned.get("constraint"):  # none asks nothing of the nodes: not read
            try:
                cleaned["constraint"] = str(check_constraint(cleaned["constraint"]))
            except BadConstraint as exc:
                self.add_error("constraint", f"{str(exc)[0].upper()}{str(exc)[1:]}.")
        if "team" not in cleaned or "queue" not in cleaned:
            return
        found = queue_for(cleaned["team"], cleaned["queue"])
        if isinstance(found, Refusal):
            self.add_error(found.field, found.message)
            return
        cleaned["queue"] = found
        if found is not None and "cpus" in cleaned and "preemptable" in cleaned:
            for refusal in refusals(found, cpus=cleaned["cpus"], preemptable=cleaned["preemptable"]):
                self.add_error(refusal.field, refusal.message)

    def _isolation(self, team: Team, image: RuntimeImage, asked: str) -> str:
        """The isolation the job runs with: strong when its team or image requires it (asking for
        standard then is an error), else what was asked, standard by default."""
        required = strong_required_by(team, image)
        if required and asked == Isolation.STANDARD:
            self.add_error("isolation", f"{required[0].upper()}{required[1:]} requires isolation=strong.")
        return isolation_of(asked, required_by=required)

    def _clean_files(self) -> list[tuple[str, File]]:
        self.reused_blobs = []
        uploads = self.cleaned_data.get("data") or []
        if len(uploads) > (most := self.maxima()["data"]):
            self.add_error("data", f"At most {most} data files.")
            return []
        for raw in self.unnamed:
            self.add_error("data", f"{raw!r} is not a usable file name")
        staged: list[tuple[str, File]] = []
        seen: set[str] = set()
        for upload in uploads:
            try:
                name = sanitize_name(upload.name)
            except BadFileName as exc:
                self.add_error("data", str(exc))
                continue
            if name in seen:
                self.add_error("data", f"Two files are named {name}.")
                continue
            seen.add(name)
            staged.append((name, upload))
        if self.reuse_from is not None:
            staged.extend(self._reused_files([n for n in self.cleaned_data.get("reuse") or [] if n not in seen]))
        return staged

    def _reused_files(self, names: list[str]) -> list[tuple[str, File]]:
        """The earlier job's own data files of these names, opened in the store; a template's blob it named is
        named again (`reused_blobs`: stored once, not copied nor charged again), unless the job goes to
        another team than the blob's. Retention may have deleted them (the job says when; or it is deleting
        them now): each one gone is an error of the field."""
        assert self.reuse_from is not None
        found, gone = [], []
        team = self.cleaned_data.get("team")
        earlier = {f.name: f for f in self.reuse_from.data_files.select_related("blob")}
        for name in names:
            file = earlier.get(name)
            if self.reuse_from.files_deleted_at is not None or file is None:
                gone.append(name)
            elif file.blob is not None and team is not None and file.blob.team_id in (None, team.pk):
                self.reused_blobs.append((name, file.blob))
            else:
                try:
                    found.append((name, open_file(file.stored_key, name)))
                except FileNotFoundError:
                    gone.append(name)
        if gone:
            self.add_error("reuse", self._deleted_files(gone))
        return found

    def _deleted_files(self, names: list[str]) -> str:
        assert self.reuse_from is not None
        when = self.reuse_from.files_deleted_at
        on = f" on {timezone.localtime(when):%Y-%m-%d}" if when else ""
        them = "it" if len(names) == 1 else "them"
        return (
            f"{', '.join(names)}: deleted from the store{on}, when the earlier job's retention ended. "
            f"Attach {them} again under Data files."
        )

    def _refused(self, refused: Refused) -> None:
        """A blob gone is one of the earlier job's files here (the form names no other): said as its retention."""
        if isinstance(refused, BlobGone):
            self.add_error("reuse", self._deleted_files(refused.names))
            self.refused_status = refused.status
        else:
            super()._refused(refused)

    def declaration(self) -> Declaration:
        same = ("team", "name", "image", "command", "env", "cpus", "memory_mb", "gpus", "time_limit_s", "max_retries")
        c = self.cleaned_data
        return Declaration(
            **{n: c[n] for n in same},
            output_patterns=c["outputs"],
            files=self.staged,
            blobs=self.reused_blobs,
            isolation=c["isolation"],
            retry_on=c["retry_on"] or list(DEFAULT_RETRY_ON),
            retry_memory_factor=c["retry_memory_factor"],
            retry_delay_s=c["retry_delay_s"],
            after=c["after"],
            inputs=c["inputs"],
            queue=c["queue"],
            constraint=c["constraint"],
            preemptable=c["preemptable"],
            # Linked within its team only: another team's members must not learn of the earlier job.
            resubmitted_from=self.reuse_from if self.reuse_from and self.reuse_from.team_id == c["team"].pk else None,
        )


def _queue_label(queue: Queue) -> str:
    said = [f"priority {queue.priority}"]
    if queue.max_running_cores_per_team is not None:
        said.append(f"at most {queue.max_running_cores_per_team} cores a team")
    if queue.preempts:
        said.append("preempts lower queues")
    return f"{queue.name} ({', '.join(said)})"


class ArrayForm(JobForm):
    """An array: a job's every field, and which indices its tasks take (each a job with E31_ARRAY_INDEX)."""

    indices = TextField(
        max_length=10000, label="Array indices",
        help_text="Run one task per index: 0-99, 1,3,5-7 or 0-20:5; each task reads its index from E31_ARRAY_INDEX.",
    )  # fmt: skip
    max_running = IntegerField(
        **column_bounds(JobArray, "max_running", least=1), required=False, label="At most running",
        help_text="Tasks that hold compute at once; empty: as many as the pool gives.",
        error_messages={"invalid": "Enter a whole number of tasks, such as 8."},
    )  # fmt: skip
    stop_after_failures = IntegerField(
        **column_bounds(JobArray, "stop_after_failures", least=1), required=False, label="Stop after failures",
        help_text="After this many failed tasks the rest are cancelled; empty: never.",
        error_messages={"invalid": "Enter a whole number of tasks, such as 5."},
    )  # fmt: skip

    def __init__(self, *args: Any, indices_required: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["indices"].required = indices_required

    def clean_indices(self) -> list[int]:
        text = self.cleaned_data.get("indices") or ""
        if not text.strip():
            return []
        try:
            return parse_indices(text, most=settings.E31_ARRAY_MAX_TASKS)
        except BadIndices as exc:
            raise forms.ValidationError(str(exc)) from None

    def array_request(self) -> ArrayRequest:
        """What jobs.submit.service.submit takes besides the declaration to submit an array."""
        c = self.cleaned_data
        return ArrayRequest(c["indices"], max_running=c["max_running"], stop_after_failures=c["stop_after_failures"])
