"""The exit codes scripts can rely on (docs/cli.md lists them): one per job outcome, one per kind of error."""

from enum import IntEnum


class Exit(IntEnum):
    SUCCEEDED = 0
    FAILED = 1  # the job ran and exited non-zero (or its outputs were refused)
    USAGE = 2  # a bad command line (Click's own code for usage errors)
    TIMED_OUT = 3
    OUT_OF_MEMORY = 4
    CANCELLED = 5
    NODE_LOST = 6
    REJECTED = 7
    REFUSED = 8  # the server refused the request: bad input (400/413/422), a conflict (409)
    AUTH = 9  # no token, a bad or revoked token (401), or not allowed (403)
    NOT_FOUND = 10  # no such job (or one of another team), no such node or output
    UNREACHABLE = 11  # no server answers at E31_URL, or it timed out
    SERVER_ERROR = 12  # the server answered 5xx
    CHECKSUM = 13  # a downloaded output does not match its sha256
    THROTTLED = 14  # still throttled (429) after waiting as Retry-After asked
    PREEMPTED = 15  # released as preempted: only when it could not be put back in the queue


# A released job's outcome → the exit code of `e31 submit --wait` and `e31 wait`.
OUTCOME_EXITS = {
    "succeeded": Exit.SUCCEEDED,
    "failed": Exit.FAILED,
    "timed_out": Exit.TIMED_OUT,
    "out_of_memory": Exit.OUT_OF_MEMORY,
    "cancelled": Exit.CANCELLED,
    "node_lost": Exit.NODE_LOST,
    "rejected": Exit.REJECTED,
    "preempted": Exit.PREEMPTED,
}


class CliError(Exception):
    """Ends the command with one line on stderr and `code`; `refused`: a refusal's words by field."""

    def __init__(self, message: str, code: Exit, *, refused: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.refused = refused or {}
