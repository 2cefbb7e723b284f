"""verify_ledger, run and kept: the last result is what /metrics reports and operators see."""

import time
from collections.abc import Sequence
from pathlib import Path

from django.utils import timezone

from accounting.meter import LedgerCheck, verify_ledger
from accounting.models import LedgerVerification


def verify_and_keep(*, heads_files: Sequence[Path] | None = None) -> LedgerCheck:
    """Verify the whole ledger and keep the result (a row per run: the history of the checks)."""
    started = time.monotonic()
    check = verify_ledger(heads_files=heads_files)
    LedgerVerification.objects.create(
        ran_at=timezone.now(),
        ok=bool(check),
        records=check.records,
        head_sequence=check.head.sequence,
        problem=str(check.problem or ""),
        seconds=time.monotonic() - started,
    )
    return check


def last_verification() -> LedgerVerification | None:
    return LedgerVerification.objects.order_by("-ran_at", "-id").first()
