from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
api_urlpatterns: list[URLPattern] = []
