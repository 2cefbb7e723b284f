from django.apps import AppConfig


class JobTemplatesConfig(AppConfig):
    name = "jobtemplates"
    default_auto_field = "django.db.models.BigAutoField"
