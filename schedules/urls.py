from django.urls import URLPattern

app_name = "schedules"
urlpatterns: list[URLPattern] = []
api_urlpatterns: list[URLPattern] = []
