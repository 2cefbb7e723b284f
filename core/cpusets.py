"""Cpuset lists, as the kernel writes them ("0-3,6"): parsed into sorted core ids."""


def parse_cpu_list(text: str) -> list[int]:
    """Sorted, distinct core ids; ValueError for the caller to say where it came from."""
    cores: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        low, sep, high = part.partition("-")
        try:
            first, last = int(low), int(high if sep else low)
        except ValueError:
            raise ValueError(f"bad cpu list {text!r}") from None
        if first < 0 or first > last:
            raise ValueError(f"bad cpu list {text!r}")
        cores.update(range(first, last + 1))
    return sorted(cores)
