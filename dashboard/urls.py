from django.urls import path

from dashboard import views
from dashboard.metrics import metrics_view
from jobs import urls as jobs_urls

app_name = "dashboard"
urlpatterns = [
    path("", views.review_page, name="review"),
    path("review/now/", views.review_now, name="review_now"),
    path("metrics", metrics_view, name="metrics"),
]

# The previews a job's page opens are screens of this app under the "jobs" names the page links to: the site
# includes them with the job's own URLs as that one namespace.
job_urlpatterns = [
    *jobs_urls.urlpatterns,
    path("jobs/<uuid:job_id>/preview/<output_path:path>", views.output_preview, name="preview"),
    path("jobs/<uuid:job_id>/image/<output_path:path>", views.output_image, name="image"),
]
