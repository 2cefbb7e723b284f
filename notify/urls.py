from django.urls import URLPattern, path

from notify import views

app_name = "notify"
urlpatterns: list[URLPattern] = [
    path("account/notifications/unsubscribe/<str:token>/", views.unsubscribe, name="unsubscribe"),
]
api_urlpatterns: list[URLPattern] = []
