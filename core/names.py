"""Names others read in a list, refused where a control character could rewrite a terminal or reorder text."""

import unicodedata

from django.core.exceptions import ValidationError

# Unicode's bidirectional formatting characters: the embeddings and overrides, the isolates and the marks.
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
LINE_BREAKS = frozenset("\u2028\u2029\u0085")  # the line and paragraph separators, and NEL (also a control)


def unshowable(text: str) -> str | None:
    """The first character a list cannot show as itself, or None."""
    for char in text:
        if char in BIDI_CONTROLS or char in LINE_BREAKS or unicodedata.category(char) == "Cc":
            return char
    return None


def showable_name(value: str) -> None:
    char = unshowable(value)
    if char is None:
        return
    kind = "a bidirectional control" if char in BIDI_CONTROLS else "a control character or line break"
    raise ValidationError(
        "A name cannot contain %(char)s (%(kind)s): it would not show as itself in a list.",
        code="unshowable",
        params={"char": f"U+{ord(char):04X}", "kind": kind},
    )
