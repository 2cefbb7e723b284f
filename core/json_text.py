"""JSON that people and jobs send: nesting deeper than the decoder recurses is a ValueError, not a 500."""

import json
from typing import Any


def parse(text: str | bytes) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply.") from None


def is_unicode(value: Any) -> bool:
    """Whether no string holds a lone surrogate, which JSON allows and UTF-8 cannot; walked without recursion."""
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
