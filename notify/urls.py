from django.urls import URLPattern, path

from notify import views
from notify.api import NotificationsView

app_name = "notify"
urlpatterns: list[URLPattern] = [
    path("account/notifications/", views.notifications, name="notifications"),
    path("account/notifications/unsubscribe/<str:token>/", views.unsubscribe, name="unsubscribe"),
]
api_urlpatterns: list[URLPattern] = [
    path("api/v1/notifications/", NotificationsView.as_view(), name="notifications-api"),
]
