"""/api/schema/ (OpenAPI 3) and /api/docs/ (Swagger UI from the site's own static files)."""

import re

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client
from drf_spectacular.generators import SchemaGenerator

from core.when import AGO_SCHEMA
from e31site import api
from tests.conftest import api_client_for


def test_swagger_ui_is_served_from_the_sites_own_files(db):
    page = Client().get("/api/docs/")

    assert page.status_code == 200
    html = page.content.decode()
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert any("swagger-ui" in s for s in sources)
    assert all(s.startswith("/") and not s.startswith("//") for s in sources), sources  # no CDN
    assert "<script>" not in html  # its start-up script is a file too: the CSP allows no inline script


def test_swagger_ui_files_are_there(db, settings):
    from django.contrib.staticfiles import finders

    assert finders.find("drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")


def test_the_schema_documents_every_list_filter(db):
    schema = Client().get("/api/schema/?format=json").json()
    assert schema["openapi"].startswith("3.")

    def params(path: str) -> set[str]:
        return {p["name"] for p in schema["paths"][path]["get"].get("parameters", [])}

    assert params("/api/v1/jobs/") >= {"stage", "outcome", "user", "image", "since", "until", "q", "team"}
    assert params("/api/v1/accounting/records/") >= {"team", "node", "outcome", "since", "until"}
    assert params("/api/v1/tokens/") >= {"user", "since", "until", "q"}
    assert params("/api/v1/pool/nodes/") >= {"state", "q"}
    assert "post" in schema["paths"]["/api/v1/tokens/"] and "delete" in schema["paths"]["/api/v1/tokens/{id}/"]


# Every endpoint of the API: without a token it is 401; over a person's rate it is 429 with Retry-After.
ENDPOINTS = [
    ("get", "/api/v1/jobs/"),
    ("post", "/api/v1/jobs/"),
    ("get", "/api/v1/jobs/00000000-0000-0000-0000-000000000000/"),
    ("post", "/api/v1/jobs/00000000-0000-0000-0000-000000000000/cancel/"),
    ("get", "/api/v1/jobs/00000000-0000-0000-0000-000000000000/logs/"),
    ("get", "/api/v1/jobs/00000000-0000-0000-0000-000000000000/outputs/"),
    ("get", "/api/v1/jobs/00000000-0000-0000-0000-000000000000/outputs/model.json"),
    ("get", "/api/v1/pool/nodes/"),
    ("get", "/api/v1/pool/nodes/local/"),
    ("post", "/api/v1/pool/nodes/local/drain/"),
    ("post", "/api/v1/pool/nodes/local/resume/"),
    ("get", "/api/v1/accounting/records/"),
    ("get", "/api/v1/accounting/usage/"),
    ("get", "/api/v1/tokens/"),
    ("post", "/api/v1/tokens/"),
    ("get", "/api/v1/tokens/1/"),
    ("delete", "/api/v1/tokens/1/"),
]


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_every_endpoint_needs_a_token(db, method, path):
    from rest_framework.test import APIClient

    response = getattr(APIClient(), method)(path)

    assert response.status_code == 401 and response["WWW-Authenticate"].startswith("Token")


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_every_endpoint_is_throttled_per_person_with_retry_after(settings, operator, method, path):
    settings.E31_API_THROTTLE_RATES = {**settings.E31_API_THROTTLE_RATES, "user": "1/min"}
    api = api_client_for(operator)  # the operator endpoints check permissions before the rate
    api.get("/api/v1/tokens/")  # the one request of the minute

    response = getattr(api, method)(path)

    assert response.status_code == 429 and int(response["Retry-After"]) > 0


@pytest.mark.parametrize(
    "path", ["/api/v1/jobs/", "/api/v1/accounting/records/", "/api/v1/accounting/usage/", "/api/v1/tokens/"]
)
def test_a_time_with_an_offset_postgresql_cannot_store_is_still_a_time(api, path):
    # Found by Schemathesis: ISO 8601 allows +16:00, PostgreSQL's timestamptz does not (it was a 500).
    response = api.get(path, {"since": "2000-01-01T00:00:00+16:00", "until": "2100-01-01T00:00:00-23:59"})

    assert response.status_code == 200
    body = response.json()
    # Between the two lies now: the caller's token (made by `api`) is in, and there is nothing else.
    assert (body["count"] if "count" in body else len(body["rows"])) == (1 if path == "/api/v1/tokens/" else 0)


def test_every_operation_documents_the_errors_it_may_answer(db):
    schema = Client().get("/api/schema/?format=json").json()

    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            if path.startswith("/api/v1/"):
                assert {"400", "401", "403", "404", "429"} <= set(operation["responses"]), f"{method} {path}"
                assert "Retry-After" in operation["responses"]["429"]["headers"]
            else:
                assert operation["security"] == [], f"{method} {path} needs no credentials"
    assert {"402", "409", "413", "422"} <= set(schema["paths"]["/api/v1/jobs/"]["post"]["responses"])


@pytest.mark.parametrize("operation", [("post", "/api/v1/jobs/{id}/pinned/"), ("get", "/api/v1/jobs/{id}/pin/")])
def test_statuses_of_an_operation_the_api_does_not_have_stop_the_schema(db, monkeypatch, operation):
    monkeypatch.setattr(api, "MORE", {**api.MORE, operation: {409: "Pinning is not allowed."}})

    with pytest.raises(ImproperlyConfigured, match=re.escape(" ".join(operation))):
        SchemaGenerator().get_schema(request=None, public=True)


def test_the_schema_states_the_formats_of_the_parameters(db):
    schema = Client().get("/api/schema/?format=json").json()

    def param(path: str, name: str) -> dict:
        return next(p["schema"] for p in schema["paths"][path]["get"]["parameters"] if p["name"] == name)

    moment = [{"format": "date"}, {"format": "date-time"}, AGO_SCHEMA]  # or a duration back from now
    assert param("/api/v1/jobs/", "since")["anyOf"] == param("/api/v1/accounting/usage/", "until")["anyOf"] == moment
    assert re.match(AGO_SCHEMA["pattern"], "1h30m") and not re.match(AGO_SCHEMA["pattern"], "yesterday")
    # The server reads a bare number as no moment (an epoch's digits would be a silent guess): so does the document.
    assert not re.match(AGO_SCHEMA["pattern"], "46") and not re.match(AGO_SCHEMA["pattern"], " ")
    assert param("/api/v1/jobs/", "team") == {"type": "string", "maxLength": 50, "pattern": "^[-a-zA-Z0-9_]+$"}
    assert re.match(param("/api/v1/accounting/statements/", "month")["pattern"], "2026-02")
    assert not re.match(param("/api/v1/accounting/statements/", "month")["pattern"], "9999-12")
    assert param("/api/v1/pool/nodes/", "state")["enum"] == ["active", "draining", "offline", "proving"]
