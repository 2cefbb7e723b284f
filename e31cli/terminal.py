r"""What the command line prints of data it did not write (names, reasons, commands, paths, logs): text
for the terminal to show, never instructions for it to follow.

Names and logs come from other people's jobs. A terminal obeys the characters it is sent (ESC starts
sequences that change the window's title, clear the screen or make hyperlinks; CR lets a line overwrite
what it said; U+202E reverses what follows) and Rich obeys its markup (`[/x]` is an error, `[link=…]`
a hyperlink). So the consoles print with Rich's markup off, and every control or format character of
the data is shown as its Python escape: `\x1b`, `\r`, `\n`, `\u202e`.
"""

import codecs
import re
import unicodedata

# Control (Cc), format (Cf: bidirectional overrides, zero-width characters), line and paragraph
# separators (Zl, Zp) and lone surrogates (Cs).
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_NOT_PRINTABLE_ASCII = re.compile(r"[^\x20-\x7e]")  # the candidates; most text has none


def escape(char: str) -> str:
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: str, *, keep: str = "") -> str:
    """`text` with each control or format character, except those in `keep`, shown as its escape."""

    def shown(match: re.Match[str]) -> str:
        char = match.group()
        if char in keep or unicodedata.category(char) not in _HIDDEN_CATEGORIES:
            return char
        return escape(char)

    return _NOT_PRINTABLE_ASCII.sub(shown, text)


def json_visible(text: str) -> str:
    """JSON text with each control or format character written as a JSON escape (`\\u202e`): the same
    JSON, safe on a terminal (json.dumps leaves DEL, C1 and format characters as they are)."""

    def shown(match: re.Match[str]) -> str:
        char = match.group()
        if char == "\n" or unicodedata.category(char) not in _HIDDEN_CATEGORIES:  # a line end of the indented text
            return char
        units = char.encode("utf-16-be", "surrogatepass")
        return "".join(f"\\u{int.from_bytes(units[i : i + 2], 'big'):04x}" for i in range(0, len(units), 2))

    return _NOT_PRINTABLE_ASCII.sub(shown, text)


class LogText:
    r"""A job's log, chunk by chunk, as UTF-8 text safe for a terminal: line ends and tabs kept, every
    other control character shown as its escape, bytes that are not UTF-8 shown as `\xff`. A character
    split between two chunks waits for its end."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="backslashreplace")

    def feed(self, chunk: bytes) -> bytes:
        return visible(self._decoder.decode(chunk), keep="\n\t").encode()

    def end(self) -> bytes:
        return visible(self._decoder.decode(b"", final=True), keep="\n\t").encode()
