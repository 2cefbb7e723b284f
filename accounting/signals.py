"""What other apps hear of a team's money (notify, webhooks), sent inside the transaction that wrote it."""

from django.dispatch import Signal

# kwargs: warning (an accounting BudgetWarning, written once per team, month and level: 80 or 100 percent).
budget_crossed = Signal()
