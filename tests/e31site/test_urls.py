"""The site's URLs: a job's routes are the jobs app's, the site only includes them."""

import uuid

from django.urls import URLPattern, resolve, reverse

from e31site import urls as site_urls
from jobs import urls as jobs_urls


def test_the_site_routes_no_job_url_itself():
    own = [str(p.pattern) for p in site_urls.urlpatterns if isinstance(p, URLPattern)]

    assert not [route for route in own if "jobs" in route]


def test_an_outputs_api_url_is_routed_by_the_jobs_app_to_the_api_view():
    match = resolve(f"/api/v1/jobs/{uuid.uuid4()}/outputs/a/b c\n.txt")

    assert match.url_name == "job-output-file" and match.kwargs["path"] == "a/b c\n.txt"
    assert match.func.cls.__name__ == "JobViewSet"  # type: ignore[attr-defined]
    assert match.route in [str(p.pattern) for p in jobs_urls.api_urlpatterns]


def test_a_jobs_previews_are_screens_of_the_job_page():
    job_id = uuid.uuid4()

    for name, kind in [("jobs:preview", "preview"), ("jobs:image", "image")]:
        url = reverse(name, args=[job_id, "a/b.png"])
        assert url == f"/jobs/{job_id}/{kind}/a/b.png"
        assert resolve(url).func.__module__ == "jobs.web.job_page"
    assert resolve(f"/jobs/{job_id}/").view_name == "jobs:detail"
