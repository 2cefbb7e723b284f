"""What other apps hear of a schedule's runs (notify's digest reads them; webhooks send them)."""

from django.dispatch import Signal

# kwargs: run (a ScheduleRun whose status is missed or refused, with its reason), sent in its transaction.
run_not_submitted = Signal()
