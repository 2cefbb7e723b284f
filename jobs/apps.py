from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from jobs import receivers  # models are loaded only now; connecting here is Django's documented way

        receivers.connect()
