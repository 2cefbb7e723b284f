from django.apps import AppConfig


class SchedulesConfig(AppConfig):
    name = "schedules"

    def ready(self) -> None:
        from schedules import receivers  # models are loaded only now; connecting here is Django's documented way

        receivers.connect()
