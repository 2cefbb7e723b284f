"""CSV answers of the accounting API (`?format=csv`): one header row, then one row per item."""

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any

from rest_framework.renderers import BaseRenderer


def csv_text(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """`rows` as CSV: `columns` as the header, lists and objects as their JSON-ish text, None empty."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if row.get(c) is None else _cell(row.get(c)) for c in columns])
    return out.getvalue()


def _cell(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


class CSVRenderer(BaseRenderer):
    """Renders a list of objects (or a page's `results`): the columns are the first row's keys."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if isinstance(data, Mapping) and "results" in data:
            data = data["results"]
        if isinstance(data, Mapping):  # an error, or one object
            data = [data]
        rows = list(data or [])
        columns = list(rows[0].keys()) if rows else []
        return csv_text(rows, columns).encode()
