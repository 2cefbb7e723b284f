from django.urls import URLPattern, URLResolver, path
from rest_framework.routers import SimpleRouter

from webhooks import views
from webhooks.api import WebhookViewSet

app_name = "webhooks"
urlpatterns: list[URLPattern] = [
    path("account/webhooks/", views.webhooks_page, name="page"),
    path("account/webhooks/<int:webhook_id>/delete/", views.delete_webhook, name="delete"),
    path("account/webhooks/<int:webhook_id>/deliveries/", views.deliveries, name="deliveries"),
    path(
        "account/webhooks/<int:webhook_id>/deliveries/<uuid:delivery_id>/redeliver/",
        views.redeliver,
        name="redeliver",
    ),
]

router = SimpleRouter(trailing_slash=True)
router.register("api/v1/webhooks", WebhookViewSet, basename="webhook")
api_urlpatterns: list[URLPattern | URLResolver] = list(router.urls)
