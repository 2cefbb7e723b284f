"""A real SMTP server on loopback (aiosmtpd), started and stopped per test, and the site's mail pointed at it."""

import socket
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage

import pytest
from aiosmtpd.controller import Controller


@dataclass
class Inbox:
    """What the server received; `refuse` set: it answers each recipient with that reply (e.g. a 451)."""

    refuse: str = ""
    messages: list[EmailMessage] = field(default_factory=list)
    refused: int = 0

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):  # noqa: N802 (aiosmtpd's name)
        if self.refuse:
            self.refused += 1
            return self.refuse
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's name)
        self.messages.append(message_from_bytes(envelope.content, policy=policy.default))
        return "250 Message accepted for delivery"


def free_port() -> int:
    """A port nothing listens on now (aiosmtpd's controller checks its own start by connecting to its port,
    so it cannot be given port 0)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def smtp_server():
    """An aiosmtpd server on 127.0.0.1 for this test: `.port`, and its Inbox as `.handler`."""
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port(), ready_timeout=10)
    controller.start()
    try:
        yield controller
    finally:
        controller.stop()


@pytest.fixture
def smtp(smtp_server, settings) -> Inbox:
    """Mail on, through the loopback server: the site's settings as an operator would set them."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", smtp_server.port
    settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
    settings.EMAIL_USE_TLS = False
    settings.EMAIL_TIMEOUT = 10
    settings.DEFAULT_FROM_EMAIL = "e31@e31.example"
    settings.E31_SITE_URL = "https://e31.example"
    return smtp_server.handler


@pytest.fixture
def mail_on(settings):
    """Mail on, for tests that write mails but send none (the outbox's rows)."""
    settings.EMAIL_HOST = "127.0.0.1"


@pytest.fixture
def mail_off(settings):
    settings.EMAIL_HOST = ""


@pytest.fixture
def alice(member):
    """The member, with the address her mail goes to (test_digest.py has its own, in Paris)."""
    member.email = "alice@e31.example"
    member.save(update_fields=["email"])
    return member
