"""/favicon.ico: what a browser asks for where a response names no icon (the admin, the API's JSON)."""

import pytest
from django.test import Client


@pytest.fixture
def browser(settings) -> Client:
    # Served as under `make run`: WhiteNoise answers /static/; finders stand in for the collected folder.
    settings.WHITENOISE_USE_FINDERS = True
    return Client()


def test_the_favicon_is_the_sites_icon_served_as_a_static_file(browser, db):
    response = browser.get("/favicon.ico")

    assert response.status_code == 302 and response["Location"] == "/static/favicon.svg"
    icon = browser.get(response["Location"])
    assert icon.status_code == 200 and icon["Content-Type"] == "image/svg+xml"
    assert b"".join(icon.streaming_content).startswith(b"<svg ")


def test_the_favicon_needs_no_login_and_is_kept_a_day(client, db):
    response = client.get("/favicon.ico")

    assert response.status_code == 302 and "max-age=86400" in response["Cache-Control"]


def test_the_favicon_refuses_a_post(client, db):
    assert client.post("/favicon.ico").status_code == 405
