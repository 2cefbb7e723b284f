from django.urls import path

from accounting import views

app_name = "accounting"
urlpatterns = [
    path("accounting/statements/", views.statements, name="statements"),
    path("accounting/statements/<slug:team>/<str:month>/", views.statement_page, name="statement"),
]
