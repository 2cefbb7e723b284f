from django.urls import path

from isolation import views

app_name = "isolation"
urlpatterns = [
    path("isolation/", views.isolation_page, name="page"),
    path("isolation/results/<int:result_id>/", views.probe_result, name="result"),
]
