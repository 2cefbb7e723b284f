from django.urls import path

from ops import views

app_name = "ops"
urlpatterns = [
    path("operator/", views.operator_panel, name="operator"),
    path("operator/nodes/", views.operator_nodes, name="nodes"),
    path("operator/nodes/<slug:name>/", views.node_detail, name="node"),
    path("operator/nodes/<slug:name>/<str:action>/", views.node_action, name="node_action"),
    path("usage/", views.usage_page, name="usage"),
    path("usage.csv", views.usage_csv, name="usage_csv"),
]
