"""`since` and `until`, read one way (core.filters.MomentField, through core.when.parse_moment) by the lists'
filters, the usage and utilisation APIs and the review page: the same values taken, the same refused, in
the words docs/api.md gives."""

import pytest
from django.urls import reverse

ENDPOINTS = ["/api/v1/jobs/", "/api/v1/accounting/records/", "/api/v1/accounting/usage/"]
UTILISATION = "/api/v1/accounting/utilisation/"


@pytest.mark.parametrize("raw", ["yesterday", "2026-02-30", "2026-03-03T25:00"])
@pytest.mark.parametrize("name", ["since", "until"])
def test_a_bad_moment_is_400_naming_it_in_the_same_words_everywhere(api, operator_api, client, member, name, raw):
    answers = [api.get(url, {name: raw}) for url in ENDPOINTS] + [operator_api.get(UTILISATION, {name: raw})]

    assert [(a.status_code, a.json()) for a in answers] == [(400, {name: ["Enter a valid date/time."]})] * 4
    client.force_login(member)
    assert client.get(reverse("dashboard:review"), {name: raw}).status_code == 400


@pytest.mark.parametrize("raw", ["2026-03-03", " 2026-03-03 ", "2026-03-03T10:00:00+16:00"])
def test_a_moment_is_taken_everywhere(api, operator_api, client, member, raw):
    answers = [api.get(url, {"since": raw}) for url in ENDPOINTS] + [operator_api.get(UTILISATION, {"since": raw})]

    assert [a.status_code for a in answers] == [200] * 4
    client.force_login(member)
    assert client.get(reverse("dashboard:review"), {"since": raw}).status_code == 200
