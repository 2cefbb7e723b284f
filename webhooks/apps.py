from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"

    def ready(self) -> None:
        from accounting.signals import budget_crossed
        from jobs.signals import array_released, job_released
        from schedules.signals import run_not_submitted
        from webhooks import receivers

        job_released.connect(receivers.on_job_released, dispatch_uid="webhooks.job_released")
        array_released.connect(receivers.on_array_released, dispatch_uid="webhooks.array_released")
        run_not_submitted.connect(receivers.on_run_not_submitted, dispatch_uid="webhooks.run_not_submitted")
        budget_crossed.connect(receivers.on_budget_crossed, dispatch_uid="webhooks.budget_crossed")
