from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"

    def ready(self) -> None:
        from jobs import receivers  # models are loaded only now; connecting here is Django's documented way

        receivers.connect()
