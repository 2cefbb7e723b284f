"""/account/notifications/: the choices as a form, saved by POST; says when mail is off or has nowhere to go."""

import pytest
from django.test import Client

from notify.models import Preference

URL = "/account/notifications/"


@pytest.fixture
def browser(client: Client, member) -> Client:
    client.force_login(member)
    return client


def test_the_page_shows_the_choices_in_few_queries(browser, member, django_assert_max_num_queries):
    Preference.objects.create(user=member, email_on=["failed"], digest=False, digest_hour=5)

    with django_assert_max_num_queries(6):
        response = browser.get(URL)

    assert response.status_code == 200
    page = response.content.decode()
    assert 'value="failed" id="id_email_on_1" checked' in page
    assert 'value="succeeded" id="id_email_on_0" checked' not in page
    form = response.context["form"]
    assert form.initial == {"email_on": ["failed"], "digest": False, "digest_hour": 5}
    assert 'name="digest_hour"' in page and '<option value="5" selected>' in page


def test_the_page_says_mail_is_off(browser, mail_off):
    page = browser.get(URL).content.decode()

    assert "no SMTP server is set: no mail is sent" in page


def test_the_page_says_a_person_without_an_address_gets_none(browser, mail_on):
    page = browser.get(URL).content.decode()

    assert "no SMTP server" not in page
    assert "Your account has no e-mail address: you get no mail." in page


def test_the_page_names_the_address(browser, member, mail_on):
    member.email = "alice@e31.example"
    member.save(update_fields=["email"])

    page = browser.get(URL).content.decode()

    assert "Mail goes to <strong>alice@e31.example</strong>" in page
    assert "no e-mail address" not in page


def test_post_saves_and_redirects(browser, member):
    response = browser.post(URL, {"email_on": ["failed", "out_of_memory"], "digest_hour": "8"})

    assert response.status_code == 302 and response["Location"] == f"{URL}?saved=1"
    saved = Preference.objects.get(user=member)
    assert (saved.email_on, saved.digest, saved.digest_hour) == (["failed", "out_of_memory"], False, 8)
    assert "Saved." in browser.get(response["Location"]).content.decode()


@pytest.mark.parametrize(
    "form", [{"digest_hour": "24"}, {"digest_hour": "x"}, {"email_on": ["exploded"], "digest_hour": "7"}]
)
def test_a_bad_post_shows_the_errors_and_saves_nothing(browser, member, form):
    response = browser.post(URL, form)

    assert response.status_code == 200
    assert response.context["form"].errors
    assert not Preference.objects.filter(user=member).exists()


def test_signed_out_goes_to_the_login(client, db):
    response = client.get(URL)

    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_wrong_method_is_405(browser):
    assert browser.put(URL).status_code == 405
