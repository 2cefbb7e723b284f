"""A job's outputs as the job page shows them: previews, metrics.json over runs; none runs in our origin."""

import csv
import io
import json
import math

from core import json_text
from core.charts import Line, line_chart
from jobs.models import Job, OutputFile
from jobs.storage.store import output_key, read_range

PREVIEW_MAX_BYTES = 256 * 1024
PREVIEW_ROWS = 50
# A row of commas alone would otherwise be a page of megabytes.
PREVIEW_COLUMNS = 100
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
TEXT_SUFFIXES = (".txt", ".log", ".md", ".out", ".err", ".py", ".sh", ".yaml", ".yml", ".toml", ".ini", ".cfg")
KINDS = {".csv": "csv", ".tsv": "csv", ".json": "json", ".png": "png"} | dict.fromkeys(TEXT_SUFFIXES, "text")
METRICS_FILE = "metrics.json"
METRIC_RUNS = 20  # the runs a metric's chart shows: this one and the earlier ones before it
METRIC_SERIES = 48  # the numbers of a metrics.json charted, in the file's order


def kind_of(path: str) -> str:
    """How an output is previewed: text, csv, json, png, or "" (download only)."""
    return next((kind for suffix, kind in KINDS.items() if path.lower().endswith(suffix)), "")


def read_start(job_id: object, path: str, limit: int = PREVIEW_MAX_BYTES) -> tuple[bytes, bool]:
    """The first `limit` bytes of an output, and whether the file has more."""
    data = read_range(output_key(job_id, path), 0, limit + 1)  # type: ignore[arg-type]
    return data[:limit], len(data) > limit


def preview(job: Job, output: OutputFile) -> dict:
    """What the page shows of one output: {"kind", "text" | "rows" | nothing (png), "cut"}."""
    kind = kind_of(output.path)
    if not kind:
        return {"kind": ""}
    data, cut = read_start(job.pk, output.path)
    if kind == "png":
        return {"kind": "png" if data.startswith(PNG_SIGNATURE) else ""}
    text = data.decode("utf-8", errors="replace")
    if kind == "json" and not cut:
        try:
            return {
                "kind": "json",
                "text": json.dumps(json_text.parse(text), indent=2, ensure_ascii=False)[:PREVIEW_MAX_BYTES],
            }
        except ValueError:
            return {"kind": "text", "text": text, "cut": cut, "note": "not valid JSON"}
    if kind == "csv":
        dialect = "excel-tab" if output.path.lower().endswith(".tsv") else "excel"
        rows = []
        for i, row in enumerate(csv.reader(io.StringIO(text), dialect=dialect)):
            if i > PREVIEW_ROWS:
                cut = True
                break
            if len(row) > PREVIEW_COLUMNS:
                row, cut = row[:PREVIEW_COLUMNS], True
            rows.append(row)
        return {"kind": "csv", "header": rows[:1], "rows": rows[1:], "cut": cut}
    return {"kind": "text", "text": text, "cut": cut}


def png_bytes(job: Job, output: OutputFile) -> bytes | None:
    """The whole PNG, when the output is one (by its bytes, not only its name)."""
    if kind_of(output.path) != "png" or output.size > 20 * PREVIEW_MAX_BYTES:
        return None
    data, _ = read_start(job.pk, output.path, 20 * PREVIEW_MAX_BYTES)
    return data if data.startswith(PNG_SIGNATURE) else None


def numbers(data: bytes) -> dict[str, float]:
    """The top-level numbers of a metrics.json that a chart can draw."""
    try:
        parsed = json_text.parse(data)
    except ValueError:
        return {}
    if not isinstance(parsed, dict):
        return {}
    found = {}
    for k, v in parsed.items():
        if isinstance(v, int | float) and not isinstance(v, bool) and k[:100]:
            try:
                value = float(v)
            except OverflowError:
                continue
            if math.isfinite(value):
                found[k] = value
    return found


def metrics_of(job: Job, outputs: list[OutputFile]) -> dict[str, float] | None:
    found = next((o for o in outputs if o.path == METRICS_FILE), None)
    if found is None or found.size > PREVIEW_MAX_BYTES:
        return None
    try:
        data, _ = read_start(job.pk, found.path)
    except FileNotFoundError:
        return None
    return numbers(data)


def metric_charts(job: Job, metrics: dict[str, float]) -> list[Line]:
    """The first METRIC_SERIES numbers of the job's metrics.json, each over its team's last same-named runs."""
    names = list(metrics)[:METRIC_SERIES]
    earlier = list(
        Job.objects.ended()
        .filter(
            team_id=job.team_id,
            name=job.name,
            submitted_at__lt=job.submitted_at,
            output_files__path=METRICS_FILE,
        )
        .order_by("-submitted_at")
        .values_list("pk", "submitted_at")[: METRIC_RUNS - 1]
    )
    runs: list[dict[str, float]] = []
    for pk, _ in reversed(earlier):
        try:
            data, _cut = read_start(pk, METRICS_FILE)
        except FileNotFoundError:
            continue
        runs.append(numbers(data))
    runs.append(metrics)
    return [line_chart(name, [run[name] for run in runs if name in run]) for name in names]
