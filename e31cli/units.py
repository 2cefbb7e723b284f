"""The command line's short forms: memory (512M, 2G), an array's indices (0-99%8), dependencies (ok:ID) and
inputs (ID:GLOB). Durations and moments (`--time 90m`, `--since 24h`) are sent as typed: the server reads them."""

import re
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

MEMORY = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
MB = {"k": 1 / 1024, "m": 1, "": 1, "g": 1024, "t": 1024 * 1024}


def memory_mb(text: str) -> int:
    """`512M`, `2G`, `1536` (MB) → whole megabytes."""
    found = MEMORY.match(text)
    if not found:
        raise ValueError(f"{text!r} is not a memory size such as 512M or 2G")
    mb = int(found[1]) * MB[found[2].lower()]
    if mb < 1 or mb != int(mb):
        raise ValueError(f"{text!r} is not a whole number of megabytes")
    return int(mb)


TIME_HELP = "The time limit, as sbatch reads it: 90 (minutes), 1:30:00, 2-12, or 90s, 2h, 1d."


def time_limit(text: str) -> str:
    """`--time` as sbatch reads it: a bare number is minutes, sent as `<n>m`; any other form goes as typed."""
    return f"{text.strip()}m" if text.strip().isdigit() else text


def figure(column: str, value: object) -> str:
    """Costs to the cent and seconds to a tenth, rounded half up, as tables show them; --json keeps them exact."""
    places = "0.01" if column == "cost" else "0.1" if column.endswith("seconds") else None
    if places is None or value is None:
        return "—" if value is None else str(value)
    try:
        return str(Decimal(str(value)).quantize(Decimal(places), rounding=ROUND_HALF_UP))
    except InvalidOperation:
        return str(value)


def array(text: str) -> tuple[str, int | None]:
    """Slurm's `0-99%8` → the indices as typed (the server reads them) and at most how many run at once."""
    indices, sep, limit = text.rpartition("%") if "%" in text else (text, "", "")
    indices = indices.strip()
    if not indices:
        raise ValueError(f"{text!r} names no indices: write them as 0-99, 1,3,5-7 or 0-20:5, then %N if you like")
    if not sep:
        return indices, None
    if not limit.strip().isdigit() or int(limit) < 1:
        raise ValueError(f"{text!r}: after % comes how many tasks may run at once, a whole number from 1")
    return indices, int(limit)


# `--after KIND:ID` → the form field of that kind of dependency.
AFTER = {"ok": "after_ok", "any": "after_any", "notok": "after_not_ok"}


def after(text: str) -> tuple[str, str]:
    """`ok:ID`, `any:ID` or `notok:ID` → (the form field, the id of the job or array)."""
    kind, _, target = text.partition(":")
    field = AFTER.get(kind.strip().lower())
    if field is None or not target.strip():
        raise ValueError(f"{text!r} is not ok:ID, any:ID or notok:ID")
    return field, target.strip()


def job_input(text: str) -> str:
    """`ID:GLOB` (a job's outputs matching GLOB, staged at /data/from/ID/), checked and sent as typed."""
    job, sep, glob = text.partition(":")
    if not sep or not job.strip() or not glob.strip():
        raise ValueError(f"{text!r} is not JOB_ID:GLOB, e.g. 5b0e…:model/*.json")
    return f"{job.strip()}:{glob.strip()}"


def listed(texts: list[str]) -> list[str]:
    """Values of a repeatable option that also takes a comma list: `137,out_of_memory` → two."""
    return [value.strip() for text in texts for value in text.split(",") if value.strip()]
