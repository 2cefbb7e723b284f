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


def is_unicode(value: Any) -> bool:
    """Whether every string in a parsed JSON value, keys included, is Unicode text that UTF-8 can hold:
    JSON's escapes allow a lone surrogate (`"\\ud800"`), which neither the database nor an answer can
    encode. Walked with a list, not recursion: the value may be nested as deeply as the decoder allowed."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode()
                except UnicodeEncodeError:
                    return False
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return True
