"""Data from other people's jobs shown as text: a terminal obeys control characters, so they print as escapes."""

import codecs
import json
import re
import unicodedata

# Control, format (bidi overrides, zero-width), line and paragraph separators, lone surrogates.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_NOT_PRINTABLE_ASCII = re.compile(r"[^\x20-\x7e]")  # the candidates; most text has none


def visible(text: str, *, keep: str = "") -> str:
    """`text` with each control or format character, except those in `keep`, shown as its escape."""

    def shown(match: re.Match[str]) -> str:
        char = match.group()
        if char in keep or unicodedata.category(char) not in _HIDDEN_CATEGORIES:
            return char
        return char.encode("unicode_escape").decode()  # \n, \x1b, \u202e, \U000e0041

    return _NOT_PRINTABLE_ASCII.sub(shown, text)


def json_visible(text: str) -> str:
    """The same JSON with control and format characters as JSON escapes, which json.dumps leaves raw."""

    def shown(match: re.Match[str]) -> str:
        char = match.group()
        if char == "\n" or unicodedata.category(char) not in _HIDDEN_CATEGORIES:  # a line end of the indented text
            return char
        return json.dumps(char)[1:-1]  # \u202e; beyond the BMP a surrogate pair, as JSON writes one

    return _NOT_PRINTABLE_ASCII.sub(shown, text)


class LogText:
    """A job's log, chunk by chunk, as terminal-safe UTF-8 (line ends and tabs kept); split characters wait."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="backslashreplace")

    def feed(self, chunk: bytes) -> bytes:
        return visible(self._decoder.decode(chunk), keep="\n\t").encode()

    def end(self) -> bytes:
        return visible(self._decoder.decode(b"", final=True), keep="\n\t").encode()
