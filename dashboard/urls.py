from django.urls import path

from dashboard import views
from dashboard.metrics import metrics_view
from jobs import urls as jobs_urls  # noqa: F401  registers the output_path converter of the paths below

app_name = "dashboard"
urlpatterns = [
    path("", views.review_page, name="review"),
    path("review/now/", views.review_now, name="review_now"),
    path("metrics", metrics_view, name="metrics"),
    path("jobs/<uuid:job_id>/preview/<output_path:path>", views.output_preview, name="preview"),
    path("jobs/<uuid:job_id>/image/<output_path:path>", views.output_image, name="image"),
]
