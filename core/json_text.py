"""JSON that people and jobs send: json.loads, with nesting deeper than Python's decoder recurses
(`[[[[…`, a few hundred kilobytes) raised as the malformed text it is, a ValueError, not a
RecursionError that would end a request as a 500."""

import json
from typing import Any


def parse(text: str | bytes) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply.") from None
