"""Every benchmark of bench/ at a quick size, one after another (`make bench`, a few minutes in all): each
one's whole output goes to var/log/bench-<name>.log, its headline lines (the `metric: value unit` lines it
prints last) here, with how long it took. The full sizes are each script's defaults; a figure of the
diary (docs/benchmarks.md) is taken at those, on a quiet machine.

Run: .venv/bin/python bench/run.py [NAME ...]   (make bench BENCHES="throughput lifecycle")
Exits 1 when a benchmark failed or printed no headline line, after running the others.
"""

import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Each benchmark's quick size: its figures in a few tens of seconds on a 2-core machine.
QUICK: dict[str, list[str]] = {
    "scheduler": ["--jobs", "2000", "--nodes", "20"],
    "policy": ["--jobs", "2000"],  # with fewer no job waits, and its figures say nothing
    "accounting": ["--records", "20000"],
    "digest": ["--members", "100", "--jobs", "10000", "--teams", "10"],
    "pages": ["--jobs", "5000", "--requests", "10"],
    "api": ["--submissions", "100", "--jobs", "5000", "--lists", "50", "--warm-up", "20"],
    "store": ["--mb", "20"],
    "isolation": ["--runs", "3", "--loop", "1000000", "--syscalls", "20000"],
    "lifecycle": ["--runs", "6"],
    "throughput": ["--jobs", "20"],
    "arrays": ["--tasks", "20", "--repeats", "1", "--submit-tasks", "1000", "--pass-tasks", "1000", "--nodes", "10"],
    "schedules": ["--schedules", "300", "--profiled", "50"],
    "webhooks": ["--webhooks", "1", "20", "50", "--due", "20", "500", "--deliveries", "40"],
    "scale": ["--nodes", "50", "--jobs", "1000", "--clients", "4", "--seconds", "1", "--lost", "5",
              "--beat-seconds", "5"],
}  # fmt: skip
# A figure as the benchmarks print it: a name, a colon, a number, then its unit and any note.
HEADLINE = re.compile(r"[a-z][a-z0-9_]*: -?[0-9][0-9,.]*( .*)?")


def headline(output: str) -> list[str]:
    """The lines a benchmark printed last that are figures: its headline."""
    lines = output.rstrip("\n").splitlines()
    count = 0
    while count < len(lines) and HEADLINE.fullmatch(lines[-1 - count]):
        count += 1
    return lines[len(lines) - count :]


def main(names: list[str]) -> int:
    unknown = sorted(set(names) - set(QUICK))
    if unknown:
        print(f"no benchmark named {', '.join(unknown)}: one of {', '.join(QUICK)}", file=sys.stderr)
        return 2
    failed = []
    began = time.monotonic()
    for name in names or list(QUICK):
        log = ROOT / "var" / "log" / f"bench-{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, f"bench/{name}.py", *QUICK[name]]
        started = time.monotonic()
        done = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        log.write_text(done.stdout)
        lines = headline(done.stdout)
        print(f"== {name} ({' '.join(QUICK[name])}): {time.monotonic() - started:.0f} s", flush=True)
        if done.returncode or not lines:
            failed.append(name)
            print(f"   failed (exit {done.returncode}); its output: {log.relative_to(ROOT)}", flush=True)
        for line in lines:
            print(f"   {line}", flush=True)
    print(f"{len(names or QUICK)} benchmarks in {time.monotonic() - began:.0f} s" + (
        f"; failed: {', '.join(failed)}" if failed else ""))  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
