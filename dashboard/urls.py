from django.urls import path

from dashboard import views
from dashboard.metrics import metrics_view

app_name = "dashboard"
urlpatterns = [
    path("", views.review_page, name="review"),
    path("review/now/", views.review_now, name="review_now"),
    path("metrics", metrics_view, name="metrics"),
]
