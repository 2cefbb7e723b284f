"""The allow list: hostnames matched exactly, networks against every address a name resolves to, the
name resolved once and the request sent to the address checked (no DNS rebinding), TLS kept on the name."""

import ipaddress
import socket

import httpx
import pytest

from tests.factories import webhook_of
from webhooks import hosts
from webhooks.delivery import _post, deliver_due, enqueue
from webhooks.models import Delivery


def allow(entries: list[str], settings) -> hosts.AllowList:
    settings.E31_WEBHOOK_ALLOWED_HOSTS = entries
    return hosts.AllowList.from_settings()


def test_the_settings_are_read_as_names_and_networks(settings):
    settings.E31_WEBHOOK_ALLOWED_HOSTS = ["Hooks.Example.org", "10.8.0.0/16", "127.0.0.1", "2001:db8::/32"]

    allowed = hosts.AllowList.from_settings()

    assert allowed.names == {"hooks.example.org"}
    assert [str(n) for n in allowed.networks] == ["10.8.0.0/16", "127.0.0.1/32", "2001:db8::/32"]


def test_an_address_in_the_url_is_judged_by_the_networks(settings):
    allowed = allow(["10.8.0.0/16", "2001:db8::/32"], settings)

    assert str(hosts.check("http://10.8.3.4:8080/x", allowed).address) == "10.8.3.4"
    assert str(hosts.check("https://[2001:db8::5]/x", allowed).address) == "2001:db8::5"
    for url in ("http://10.9.0.1/", "http://[::1]/", "http://169.254.169.254/latest/meta-data/"):
        with pytest.raises(hosts.NotAllowed, match="not one webhooks may reach"):
            hosts.check(url, allowed)


def test_a_name_passes_when_listed_or_when_every_address_is_in_a_network(monkeypatch, settings):
    answers = {"both.test": ["10.8.0.1", "192.168.1.1"], "inside.test": ["10.8.0.1", "10.8.0.2"]}
    monkeypatch.setattr(
        hosts.socket, "getaddrinfo", lambda host, port, **kw: [(2, 1, 6, "", (a, port)) for a in answers[host]]
    )
    allowed = allow(["10.8.0.0/16", "listed.test"], settings)
    answers["listed.test"] = ["127.0.0.1"]

    assert str(hosts.check("http://inside.test/", allowed).address) == "10.8.0.1"
    assert hosts.check("https://LISTED.test./", allowed).host == "listed.test"
    with pytest.raises(hosts.NotAllowed, match=r"both\.test \(192\.168\.1\.1\)"):
        hosts.check("http://both.test/", allowed)  # one address outside is enough to refuse


def test_urls_that_are_not_plain_http_are_refused(settings):
    allowed = allow(["127.0.0.1"], settings)
    for url, words in [
        ("ftp://127.0.0.1/", "Only http and https"),
        ("http:///path", "no host"),
        ("http://user:pw@127.0.0.1/", "user or password"),
        ("http://127.0.0.1:99999/", "not a URL"),
        ("http://no-such-host.invalid/", "cannot be resolved"),
    ]:
        with pytest.raises(hosts.NotAllowed, match=words):
            hosts.check(url, allowed)


def test_no_entry_means_webhooks_are_off(settings):
    settings.E31_WEBHOOK_ALLOWED_HOSTS = []

    assert not hosts.webhooks_are_on()
    with pytest.raises(hosts.NotAllowed, match="Webhooks are off"):
        hosts.check("http://127.0.0.1/")


def test_a_name_is_resolved_once_and_the_request_goes_to_the_address_checked(
    receivers, member, team, settings, monkeypatch
):
    """DNS rebinding: the name answers the allowed loopback address to the check and an internal one
    after; the request still reaches the address checked, with the name as its Host."""
    settings.E31_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1/32"]
    receiver = receivers()
    real = socket.getaddrinfo
    asked: list[str] = []

    def rebinding(host, port, *args, **kwargs):
        if host != "rebind.test":
            return real(host, port, *args, **kwargs)
        asked.append(host)
        address = "127.0.0.1" if len(asked) == 1 else "10.0.0.1"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    webhook, receiver.secret = webhook_of(team, member, f"http://rebind.test:{receiver.port}/hook")
    asked.clear()  # the check at creation
    enqueue(team.pk, "job.released", {}, now=webhook.created_at)

    deliver_due()

    assert asked == ["rebind.test"]
    (got,) = receiver.received
    assert got.signed and got.headers["Host"] == f"rebind.test:{receiver.port}"
    assert Delivery.objects.get().status == "delivered"


def test_https_goes_to_the_checked_address_with_the_name_for_sni_and_host():
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204)

    target = hosts.Target("https://hooks.example.org:8443/in?x=1", "https", "hooks.example.org", 8443,
                          ipaddress.ip_address("203.0.113.7"))  # fmt: skip
    with httpx.Client(transport=httpx.MockTransport(answer)) as client:
        code, _ = _post(client, target, {"X-E31-Event": "job.released"}, b"{}")

    (request,) = seen
    assert code == 204
    assert str(request.url) == "https://203.0.113.7:8443/in?x=1"
    assert request.headers["Host"] == "hooks.example.org:8443"
    assert request.extensions["sni_hostname"] == "hooks.example.org"
