"""A job's failure excerpt: the last lines of its stderr (else of its log), kept at its release so every screen can
say why it ended; bounded (TAIL_BYTES read, MAX_LINES, MAX_BYTES) and safe to show, however the job wrote."""

import logging
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from core.outcomes import Outcome
from jobs.models import LogSpan
from jobs.storage import logs

TAIL_BYTES = 64 * 1024
MAX_LINES = 10
MAX_BYTES = 2048
CUT = "…"
# A line cut to fit the room left by the lines after it keeps at least this much, else it is left out.
SHORTEST_CUT = 64

# ECMA-48 escapes: CSI (colours, cursor moves), OSC (titles, links; to BEL or ST, or the line's end), the
# other strings (DCS, SOS, PM, APC) and the two-byte escapes.
ESCAPES = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]?|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[PX^_][^\x1b]*(?:\x1b\\)?|[ -/]*[0-~]?)"
)
# C0 and C1 controls but the tab, and the bidirectional overrides that make text read otherwise than it is.
UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")

log = logging.getLogger(__name__)


def kept_for(outcome: str) -> bool:
    """Whether a job released with `outcome` keeps an excerpt: every ending but success, which needs no why."""
    return outcome != Outcome.SUCCEEDED


def last_line(excerpt: str, limit: int = 300) -> str:
    """The line a one-line place (the job list's column) shows of an excerpt: its last, at most `limit` characters."""
    line = excerpt.rpartition("\n")[2]
    return line if len(line) <= limit else CUT + line[-(limit - 1) :]


def of_log(job_id: uuid.UUID) -> str:
    """The excerpt of the job's log as it is now (sealed in the store, or live in the database), reading its tail."""
    data, start, _ = logs.last_bytes(job_id, TAIL_BYTES)
    if not data:
        return ""
    return excerpt(data, start, logs.marked_spans(job_id, start, start + len(data)))


def safely_of_log(job_id: uuid.UUID) -> str:
    """`of_log`, or "" when the store cannot be read: a missing excerpt must not keep a job from its release."""
    try:
        return of_log(job_id)
    except Exception:
        log.exception("reading the log of job %s for its excerpt failed", job_id)
        return ""


@dataclass
class Line:
    parts: list[str] = field(default_factory=list)
    streams: set[str] = field(default_factory=set)  # "err", "sys" and "" (stdout)
    cut: bool = False  # its start is before the bytes read

    @property
    def text(self) -> str:
        return "".join(self.parts)


def excerpt(data: bytes, offset: int, spans: Sequence[logs.Marked]) -> str:
    """The last stderr lines of `data` (read from `offset`); with none, the job's last lines; else the platform's."""
    lines = split_lines(logs.pieces(data, offset, spans), cut_first=offset > 0)
    stderr = [line for line in lines if LogSpan.Stream.STDERR in line.streams]
    job_lines = [line for line in lines if line.streams - {LogSpan.Stream.SYSTEM}]
    chosen = stderr or job_lines or lines
    shown = [(text, line.cut) for line in chosen if (text := clean(line.text))]
    return fit(shown[-MAX_LINES:])


def split_lines(pieces: Sequence[tuple[str, str]], *, cut_first: bool) -> list[Line]:
    """The (text, stream) pieces as lines, each knowing every stream that wrote part of it."""
    lines = [Line(cut=cut_first)]
    for text, stream in pieces:
        for i, part in enumerate(text.split("\n")):
            if i:
                lines.append(Line())
            if part:
                lines[-1].parts.append(part)
                lines[-1].streams.add(stream)
    return [line for line in lines if line.parts]


def clean(text: str) -> str:
    """One line as a screen should show it: escapes gone, what a carriage return overwrote gone, no controls."""
    text = ESCAPES.sub("", text)
    shown = [segment for segment in text.split("\r") if segment.strip()]
    text = shown[-1] if shown else ""
    return UNSAFE.sub("", text).rstrip()


def fit(lines: Sequence[tuple[str, bool]]) -> str:
    """The lines (text, whether its start was cut) joined within MAX_BYTES, the last ones kept first."""
    kept: list[str] = []
    room = MAX_BYTES
    for text, cut in reversed(lines):
        if cut:
            text = CUT + text
        newline = 1 if kept else 0
        size = len(text.encode())
        if size + newline <= room:
            kept.append(text)
            room -= size + newline
            continue
        if not kept or room - newline >= SHORTEST_CUT:
            kept.append(end_of(text, room - newline))
        break
    return "\n".join(reversed(kept))


def end_of(text: str, size: int) -> str:
    """The end of `text` in at most `size` bytes of UTF-8, led by CUT; never half a character."""
    encoded = text.encode()
    if len(encoded) <= size:
        return text
    room = size - len(CUT.encode())
    return CUT + encoded[len(encoded) - room :].decode("utf-8", errors="ignore")
