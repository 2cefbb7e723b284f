"""Names a person gives and others read in a list (a job's, a template's): one line of text that shows
as itself. A control character (an escape, a carriage return, a newline) can rewrite a terminal or a
log line, and a bidirectional control (U+202E and its kin) makes text read in another order than it is
stored, so a name that shows one thing and is another: both are refused where the name is given."""

import unicodedata

from django.core.exceptions import ValidationError

# Unicode's bidirectional formatting characters: the embeddings and overrides, the isolates and the marks.
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
LINE_BREAKS = frozenset("\u2028\u2029\u0085")  # the line and paragraph separators, and NEL (also a control)


def unshowable(text: str) -> str | None:
    """The first character of `text` a list cannot show as itself, or None."""
    for char in text:
        if char in BIDI_CONTROLS or char in LINE_BREAKS or unicodedata.category(char) == "Cc":
            return char
    return None


def showable_name(value: str) -> None:
    """A validator: refuses a name with a control character, a line break or a bidirectional control,
    naming the character (U+001B) and what it is."""
    char = unshowable(value)
    if char is None:
        return
    kind = "a bidirectional control" if char in BIDI_CONTROLS else "a control character or line break"
    raise ValidationError(
        "A name cannot contain %(char)s (%(kind)s): it would not show as itself in a list.",
        code="unshowable",
        params={"char": f"U+{ord(char):04X}", "kind": kind},
    )
