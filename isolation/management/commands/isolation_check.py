"""Run the isolation probes on a node now, wait for them, print each verdict; exit 1 on any failure."""

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from isolation import checks
from isolation.models import ProbeRound, Verdict
from pool.models import Node


class Command(BaseCommand):
    help = (
        "Run every isolation probe through the real pipeline on a node (all active nodes by default) under a "
        "runtime (each by default), wait until they are judged, and print `N probes passed, M failed`; "
        "exit 1 when any failed or could not show its boundary held."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--node", help="the node to probe (default: every active node)")
        parser.add_argument("--runtime", help="runc or runsc (default: both)")
        parser.add_argument("--probe", action="append", help="only this probe (repeatable)")
        parser.add_argument("--timeout", type=float, default=900, help="seconds to wait for the probes")

    def handle(self, *args: Any, node: str | None, runtime: str | None, probe: list[str] | None, timeout: float,
               **options: Any) -> None:  # fmt: skip
        known = checks.runtimes()
        if runtime is not None and runtime not in known:
            raise CommandError(f"unknown runtime {runtime!r}: one of {', '.join(known)}")
        unknown = sorted(set(probe or []) - set(checks.probes.BY_NAME))
        if unknown:
            raise CommandError(f"unknown probe {', '.join(unknown)}: one of {', '.join(checks.probes.BY_NAME)}")
        active = Node.objects.filter(state=Node.State.ACTIVE)
        nodes = list(Node.objects.filter(name=node) if node is not None else active)
        if not nodes:
            raise CommandError(f"no node named {node!r}" if node is not None else "no active node to probe")
        now = timezone.now()
        try:
            rounds = [
                checks.start_round(n, r, now=now, trigger="command", only=probe)
                for n in nodes
                for r in ([runtime] if runtime else list(known))
            ]
        except checks.ProbeImageMissing:
            raise CommandError(
                f"the isolation probes need the runtime image {checks.PROBE_IMAGE}, which is not registered "
                "(manage.py build_runtime_images builds it)"
            ) from None
        deadline = time.monotonic() + timeout
        waiting = list(rounds)
        while waiting := [r for r in waiting if not checks.judge_round(r, now=timezone.now())]:
            if time.monotonic() > deadline:
                self.stdout.write(f"timed out after {timeout:.0f}s: {len(waiting)} rounds not finished")
                break
            time.sleep(1)
        self.report(rounds, unfinished={r.pk for r in waiting})

    def report(self, rounds: list[ProbeRound], *, unfinished: set[int]) -> None:
        passed = failed = 0
        for round in rounds:
            self.stdout.write(f"{round.node.name} under {round.runtime}:")
            for result in round.results.order_by("id"):
                verdict = result.verdict if round.pk not in unfinished else "unfinished"
                self.stdout.write(f"  {verdict:<12} {result.probe:<13} {result.evidence}")
                if verdict == Verdict.PASSED:
                    passed += 1
                else:
                    failed += 1
        self.stdout.write(f"{passed} probes passed, {failed} failed")
        if failed:
            raise SystemExit(1)
