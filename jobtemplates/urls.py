from django.urls import path

from jobtemplates import views

app_name = "jobtemplates"
urlpatterns = [
    path("templates/", views.template_list, name="list"),
    path("templates/<int:template_id>/", views.template_run, name="run"),
    path("jobs/<uuid:job_id>/save-template/", views.save_job_as_template, name="save"),
]
