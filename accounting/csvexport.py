"""The site's one CSV writer, its cells neutralised against formula injection as OWASP says."""

import csv
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any

from rest_framework.renderers import BaseRenderer

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def safe_cell(value: Any) -> Any:
    """Text that could start a formula (not a plain number) gets a `'`."""
    if value is None or isinstance(value, int | float | Decimal):
        return value
    text = str(value)
    if text.startswith(FORMULA_STARTS) and not _PLAIN_NUMBER.fullmatch(text):
        return "'" + text
    return text


class _Line:
    """A file-like object whose write returns the line, so csv.writer can feed a streamed response."""

    def write(self, value: str) -> str:
        return value


def csv_lines(rows: Iterable[Sequence[Any]]) -> Iterator[str]:
    writer = csv.writer(_Line())
    for row in rows:
        yield writer.writerow([safe_cell(value) for value in row])


def csv_text(rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> str:
    cells = ([_cell(row.get(c)) for c in columns] for row in rows)
    return "".join(csv_lines([list(columns), *cells]))


def _cell(value: Any) -> Any:
    return ",".join(str(v) for v in value) if isinstance(value, (list, tuple)) else value


class CSVRenderer(BaseRenderer):
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
