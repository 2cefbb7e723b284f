"""The site's address as people reach it (E31_SITE_URL): the links in mails and webhook payloads."""

from django.conf import settings


def site_url(path: str) -> str:
    return settings.E31_SITE_URL + path
