from django.apps import AppConfig


class NotifyConfig(AppConfig):
    name = "notify"

    def ready(self) -> None:
        from notify import receivers  # models are loaded only now; connecting here is Django's documented way

        receivers.connect()
