"""What other apps hear of a schedule's runs (notify's digest reads them; webhooks send them)."""

from django.dispatch import Signal

# kwargs: run (a ScheduleRun missed or refused), sent in its transaction; of a minute's runs refused by the cap
# only the first: one cause, one event.
run_not_submitted = Signal()
