from django.urls import URLPattern, URLResolver, path
from rest_framework.routers import SimpleRouter

from schedules import views
from schedules.api import ScheduleViewSet

router = SimpleRouter(trailing_slash=True)
router.register("api/v1/schedules", ScheduleViewSet, basename="schedule")

app_name = "schedules"
urlpatterns: list[URLPattern | URLResolver] = [
    path("schedules/", views.schedule_list, name="list"),
    path("schedules/<int:schedule_id>/pause/", views.pause, name="pause"),
    path("schedules/<int:schedule_id>/resume/", views.resume, name="resume"),
    path("schedules/<int:schedule_id>/edit/", views.edit, name="edit"),
    path("schedules/<int:schedule_id>/delete/", views.delete, name="delete"),
    path("schedules/<int:schedule_id>/run/", views.run_now, name="run"),
]
api_urlpatterns: list[URLPattern | URLResolver] = list(router.urls)
