"""An array's indices as written (Slurm's --array without its %): `0-99`, `1,3,5-7`, `0-20:5`."""

import re

PART = re.compile(r"(\d{1,9})(?:-(\d{1,9})(?::(\d{1,9}))?)?")


class BadIndices(ValueError):
    pass


def parse_indices(text: str, *, most: int) -> list[int]:
    """The indices in ascending order, each once; BadIndices says what is wrong, or that there are more than `most`."""
    found: set[int] = set()
    parts = [part.strip() for part in text.strip().split(",")]
    if not any(parts):
        raise BadIndices("Give the indices, such as 0-99, 1,3,5-7 or 0-20:5.")
    for part in parts:
        match = PART.fullmatch(part)
        if match is None:
            raise BadIndices(f"{part!r} is not an index or a range such as 0-99 or 0-20:5.")
        first, last, step = int(match[1]), int(match[2] or match[1]), int(match[3] or 1)
        if last < first:
            raise BadIndices(f"{part!r}: a range runs from the lower index to the higher.")
        if step == 0:
            raise BadIndices(f"{part!r}: a step is at least 1.")
        if len(found) + (last - first) // step + 1 > most:
            raise BadIndices(f"At most {most} tasks in an array.")
        found.update(range(first, last + 1, step))
    return sorted(found)
