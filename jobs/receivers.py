"""What jobs hears of the pool's models: a maintenance window made, changed or deleted moves the waiting jobs'
starts and reasons, so a pass tells them (pool may not import jobs)."""

from typing import Any

from django.db.models.signals import m2m_changed, post_delete, post_save

from jobs.scheduling.dispatch import request_schedule
from pool.models import MaintenanceWindow


def on_window_changed(sender: Any, **kwargs: Any) -> None:
    request_schedule()


def connect() -> None:
    post_save.connect(on_window_changed, sender=MaintenanceWindow, dispatch_uid="jobs.window_saved")
    post_delete.connect(on_window_changed, sender=MaintenanceWindow, dispatch_uid="jobs.window_deleted")
    m2m_changed.connect(on_window_changed, sender=MaintenanceWindow.nodes.through, dispatch_uid="jobs.window_nodes")
