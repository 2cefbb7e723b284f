"""The memory probe passes when the kernel stopped it at its limit: reported as out of memory, or (an engine
that lost the OOM event) as a SIGKILL the platform did not send; never when it got past the limit."""

import pytest

from isolation.probes import FAILED, PASSED, Seen, judge_memory


def seen(*, allocated: int, outcome: str, exit_code: int | None, reason: str, survived: bool = False) -> Seen:
    lines = [("allocated_mb", str(mb)) for mb in range(16, allocated + 1, 16)]
    report = {"allocated_mb": str(allocated), **({"survived": "yes"} if survived else {})}
    return Seen(report=report, lines=lines, log="", outcome=outcome, exit_code=exit_code, reason=reason,
                outputs={}, cpu_set=[0], memory_mb=64, runtime="runc", uids=range(10001, 10002), pids_limit=256,
                output_files=1000, output_entries=1065)  # fmt: skip


@pytest.mark.parametrize(
    ("allocated", "outcome", "exit_code", "reason", "survived", "verdict"),
    [
        (48, "out_of_memory", 137, "out of memory (limit 64 MB)", False, PASSED),
        (48, "failed", 137, "exited with code 137", False, PASSED),  # the engine lost the OOM event
        (192, "failed", 137, "exited with code 137", False, FAILED),  # it got past the limit
        (48, "failed", 137, "exited with code 137", True, FAILED),
        (48, "failed", 1, "exited with code 1", False, FAILED),
        (48, "timed_out", 137, "time limit of 60 s reached", False, FAILED),  # the platform's kill
        (192, "succeeded", 0, "", True, FAILED),
    ],
)
def test_the_memory_probe_passes_only_when_the_limit_held(allocated, outcome, exit_code, reason, survived, verdict):
    assert judge_memory(seen(allocated=allocated, outcome=outcome, exit_code=exit_code, reason=reason,
                             survived=survived)).verdict == verdict  # fmt: skip
