from django.urls import path

from jobtemplates import views

app_name = "jobtemplates"
urlpatterns = [
    path("templates/", views.template_list, name="list"),
    path("templates/<int:template_id>/", views.template_run, name="run"),
    path("templates/<int:template_id>/files/", views.attach_files, name="attach"),
    path("templates/<int:template_id>/files/<str:name>/remove/", views.remove_file, name="remove_file"),
    path("templates/<int:template_id>/delete/", views.delete_template, name="delete"),
    path("jobs/<uuid:job_id>/save-template/", views.save_job_as_template, name="save"),
]
