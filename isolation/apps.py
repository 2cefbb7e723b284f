from django.apps import AppConfig


class IsolationConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "isolation"
    verbose_name = "Isolation probes"
