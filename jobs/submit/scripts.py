"""A script typed in the form's script box, as the argv the job runs: sh -c, or python3 -c under a python shebang."""

import re

# The first line names python: #!/usr/bin/env python3, #!/usr/bin/python3, #!/usr/local/bin/python3.12, …
PYTHON_SHEBANG = re.compile(r"#!\s*(?:\S*/)?(?:env\s+(?:-\S+\s+)*)?(?:\S*/)?python(?:3(?:\.\d+)?)?(?:\s.*)?")
# The most a script may be, in characters: at 4 bytes each still under the kernel's 128 KiB for one argument.
MAX_SCRIPT_CHARS = 32 * 1024


def script_argv(script: str) -> list[str]:
    """The argv that runs `script` (its line breaks as LF): python3 -c when its first line is a python
    shebang, else sh -c (another shebang is a comment to sh)."""
    first = script.split("\n", 1)[0].strip()
    return ["python3" if PYTHON_SHEBANG.fullmatch(first) else "sh", "-c", script]


def script_of(argv: list[str]) -> str | None:
    """The script an argv runs, when script_argv could have made it from a script of several lines (so
    a resubmit shows it in the script box again); None for any other command."""
    if len(argv) == 3 and "\n" in argv[2] and script_argv(argv[2]) == argv:
        return argv[2]
    return None
