from django.apps import AppConfig


class TeamsConfig(AppConfig):
    name = "teams"

    def ready(self) -> None:
        from teams import receivers  # models are loaded only now; connecting here is Django's documented way

        receivers.connect()
