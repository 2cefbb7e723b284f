from django.apps import AppConfig


class OpsConfig(AppConfig):
    """The operator panel (/operator/) and a team's usage (/usage/): read-only views over the layers below."""

    name = "ops"
    default_auto_field = "django.db.models.BigAutoField"
