"""What other apps hear of a schedule's runs (notify's digest reads them; webhooks send them)."""

from django.dispatch import Signal

# kwargs: run (a ScheduleRun whose status is missed or refused, with its reason), sent in its transaction. Of
# the runs a team's planned minute has refused by E31_TEAM_MAX_SCHEDULE_RUNS_PER_MINUTE, only the first is sent:
# one cause, one event (the others are rows, read by the digest and the runs' list).
run_not_submitted = Signal()
