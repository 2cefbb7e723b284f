from django.urls import path

from jobs import views

app_name = "jobs"
urlpatterns = [
    path("", views.job_list, name="list"),
    path("jobs/new/", views.job_new, name="new"),
    path("jobs/<uuid:job_id>/", views.job_detail, name="detail"),
    path("jobs/<uuid:job_id>/live/", views.job_live, name="live"),
    path("jobs/<uuid:job_id>/cancel/", views.job_cancel, name="cancel"),
    path("jobs/<uuid:job_id>/log.txt", views.job_log, name="log"),
    path("jobs/<uuid:job_id>/outputs/<path:path>", views.job_output, name="output"),
]
