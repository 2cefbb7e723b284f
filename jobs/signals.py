"""What other apps hear of a job's life (notify, webhooks), without jobs importing them.

Sent inside the transaction that made it so: a receiver writes rows (a mail to send, a webhook delivery)
that commit or roll back with the release, so a crash loses none and a rolled-back release sends none.
A receiver must be quick and must not send anything itself: sending is the outbox pass's.
"""

from django.dispatch import Signal

# kwargs: job (released: stage, outcome, reason, exit_code, released_at set). Sent for array tasks too.
job_released = Signal()
# kwargs: array (its released_at set: every task released), at (that time).
array_released = Signal()
