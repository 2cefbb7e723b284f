from django.apps import AppConfig


class IsolationConfig(AppConfig):
    name = "isolation"
    verbose_name = "Isolation probes"
