from django.urls import URLPattern

app_name = "webhooks"
urlpatterns: list[URLPattern] = []
api_urlpatterns: list[URLPattern] = []
