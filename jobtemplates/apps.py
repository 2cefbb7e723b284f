from django.apps import AppConfig


class JobTemplatesConfig(AppConfig):
    """Job templates (/templates/): a declaration with named parameters, submitted through jobs.forms.JobForm."""

    name = "jobtemplates"
    default_auto_field = "django.db.models.BigAutoField"
