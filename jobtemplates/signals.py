"""What other apps hear of a template's changes (schedules: whose declaration a schedule of it runs), without
jobtemplates importing them.

Sent inside the change's transaction, before the change is written: a receiver's rows (an audit event, a
schedule's runner) commit or roll back with it, and the rows it locks are taken before the change's own.
"""

from django.dispatch import Signal

# kwargs: template, by (the person who changed it; None: the platform), at, changes ({what: [before, after]}:
# "command", "file run.sh", "deleted"…, each value JSON).
template_changed = Signal()
