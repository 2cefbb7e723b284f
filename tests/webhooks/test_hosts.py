"""The allow list: hostnames matched exactly, networks against every address a name resolves to, each entry
with the ports it opens (80 and 443 when it names none); the name resolved once, within the deadline, and the
request sent to the address checked (no DNS rebinding), TLS kept on the name."""

import ipaddress
import socket
import threading
import time

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.factories import webhook_of
from webhooks import hosts
from webhooks.delivery import TIMEOUT_S, _Deadline, _post, deliver_due, enqueue
from webhooks.models import Delivery


def allow(entries: list[str], settings) -> hosts.AllowList:
    settings.E31_WEBHOOK_ALLOWED_HOSTS = entries
    return hosts.AllowList.from_settings()


def test_the_settings_are_read_as_names_and_networks_with_their_ports(settings):
    settings.E31_WEBHOOK_ALLOWED_HOSTS = [
        "Hooks.Example.org", "chat.internal:8443", "10.8.0.0/16:8000-8099", "127.0.0.1", "2001:db8::/32",
        "[::1]:9000", "[2001:db8::/48]:443",
    ]  # fmt: skip

    allowed = hosts.AllowList.from_settings()

    assert [(e.name, str(e.network) if e.network else "", e.ports) for e in allowed.entries] == [
        ("hooks.example.org", "", ((80, 80), (443, 443))),
        ("chat.internal", "", ((8443, 8443),)),
        ("", "10.8.0.0/16", ((8000, 8099),)),
        ("", "127.0.0.1/32", ((80, 80), (443, 443))),
        ("", "2001:db8::/32", ((80, 80), (443, 443))),
        ("", "::1/128", ((9000, 9000),)),
        ("", "2001:db8::/48", ((443, 443),)),
    ]


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ("10.0.0.0/33", "not an address or a network"),
        ("127.0.0.1:", "names no port"),
        ("127.0.0.1:http", "names no port"),
        ("127.0.0.1:0", "outside 1-65535"),
        ("127.0.0.1:70000", "outside 1-65535"),
        ("127.0.0.1:9000-8000", "ends before it starts"),
        ("hooks.example.org:80:81", "not an address or a network"),
        ("[::1:9000", "does not close"),
        ("[::1]9000", "does not close"),
        ("[hooks.example.org]:80", "not an address or a network"),
        ("exa mple.org", "not a host name"),
    ],
)
def test_a_bad_entry_is_refused_naming_it(entry, words):
    with pytest.raises(ValueError, match=words) as refused:
        hosts.parse_entry(entry)

    assert repr(entry) in str(refused.value)


def test_an_entry_without_a_port_opens_80_and_443_only(settings):
    allowed = allow(["127.0.0.1", "hooks.example.org"], settings)

    assert hosts.check("http://127.0.0.1/x", allowed).port == 80
    assert hosts.check("https://127.0.0.1/x", allowed).port == 443
    assert hosts.check("http://127.0.0.1:443/x", allowed).port == 443
    for url in ("http://127.0.0.1:8000/", "http://127.0.0.1:6379/", "https://127.0.0.1:5432/"):
        with pytest.raises(hosts.NotAllowed, match=r"The port \d+ of 127\.0\.0\.1 is not one webhooks may reach"):
            hosts.check(url, allowed)


ports = st.integers(1, 65535)


@given(low=ports, high=ports, port=ports)
def test_a_range_opens_exactly_its_ports(low, high, port):
    low, high = min(low, high), max(low, high)
    networks = hosts.AllowList((hosts.parse_entry(f"10.0.0.0/8:{low}-{high}"),))
    names = hosts.AllowList((hosts.parse_entry(f"hooks.example.org:{low}-{high}"),))
    address = ipaddress.ip_address("10.1.2.3")

    assert networks.covers(address, port) is (low <= port <= high)
    assert names.names("hooks.example.org", port) is (low <= port <= high)
    assert not networks.covers(ipaddress.ip_address("11.0.0.1"), port)


@given(port=ports)
def test_a_url_is_checked_on_its_port(port):
    allowed = hosts.AllowList((hosts.parse_entry("127.0.0.1:9000-9099"), hosts.parse_entry("[::1]:9000")))

    for url, opened in [(f"http://127.0.0.1:{port}/", 9000 <= port <= 9099), (f"http://[::1]:{port}/", port == 9000)]:
        if opened:
            assert hosts.check(url, allowed).port == port
        else:
            with pytest.raises(hosts.NotAllowed, match=f"The port {port} of"):
                hosts.check(url, allowed)


def test_an_address_in_the_url_is_judged_by_the_networks(settings):
    allowed = allow(["10.8.0.0/16:8080", "2001:db8::/32"], settings)

    assert str(hosts.check("http://10.8.3.4:8080/x", allowed).address) == "10.8.3.4"
    assert str(hosts.check("https://[2001:db8::5]/x", allowed).address) == "2001:db8::5"
    for url in ("http://10.9.0.1:8080/", "http://[::1]/", "http://169.254.169.254/latest/meta-data/"):
        with pytest.raises(hosts.NotAllowed, match="The host .* is not one webhooks may reach"):
            hosts.check(url, allowed)


def test_a_name_passes_when_listed_or_when_every_address_is_in_a_network(monkeypatch, settings):
    answers = {"both.test": ["10.8.0.1", "192.168.1.1"], "inside.test": ["10.8.0.1", "10.8.0.2"]}
    monkeypatch.setattr(
        hosts.socket, "getaddrinfo", lambda host, port, **kw: [(2, 1, 6, "", (a, port)) for a in answers[host]]
    )
    allowed = allow(["10.8.0.0/16", "listed.test:8443"], settings)
    answers["listed.test"] = ["127.0.0.1"]

    assert str(hosts.check("http://inside.test/", allowed).address) == "10.8.0.1"
    assert hosts.check("https://LISTED.test.:8443/", allowed).host == "listed.test"
    with pytest.raises(hosts.NotAllowed, match=r"both\.test \(192\.168\.1\.1\)"):
        hosts.check("http://both.test/", allowed)  # one address outside is enough to refuse
    with pytest.raises(hosts.NotAllowed, match="The port 443 of listed.test"):
        hosts.check("https://listed.test/", allowed)  # listed for 8443 only


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


def test_a_name_whose_dns_does_not_answer_is_given_up_at_the_deadline(settings, monkeypatch):
    allowed = allow(["10.8.0.0/16"], settings)
    hung = threading.Event()
    monkeypatch.setattr(hosts.socket, "getaddrinfo", lambda *args, **kwargs: hung.wait(30) and [])

    began = time.monotonic()
    with pytest.raises(hosts.Unresolved, match="not resolved within 0.5 s"):
        hosts.check("http://slow.test/", allowed, timeout=0.5)
    hung.set()

    assert time.monotonic() - began < 3


def test_no_entry_means_webhooks_are_off(settings):
    settings.E31_WEBHOOK_ALLOWED_HOSTS = []

    assert not hosts.webhooks_are_on()
    with pytest.raises(hosts.NotAllowed, match="Webhooks are off"):
        hosts.check("http://127.0.0.1/")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/a", "http://127.1/b", "http://2130706433/c", "http://0x7f.0.0.1/d", "http://0177.0.0.1/e",
        "http://127.0.0.1:80/f", "http://[::ffff:127.0.0.1]/g", "http://[::ffff:7f00:1]/h",
    ],
)  # fmt: skip
def test_a_receiver_is_the_address_and_port_a_url_reaches_whatever_it_calls_them(url):
    allowed = hosts.AllowList((hosts.parse_entry("127.0.0.1"), hosts.parse_entry("::ffff:127.0.0.1")))

    assert hosts.check(url, allowed).receiver == "127.0.0.1:80"


def test_a_receiver_names_its_port_and_brackets_an_ipv6_address():
    allowed = hosts.AllowList((hosts.parse_entry("127.0.0.0/8:1-65535"), hosts.parse_entry("[::1]:9000")))

    assert hosts.check("https://127.0.0.2/b?c", allowed).receiver == "127.0.0.2:443"
    assert hosts.check("http://127.0.0.1:9000/x", allowed).receiver == "127.0.0.1:9000"
    assert hosts.check("http://[::1]:9000/x", allowed).receiver == "[::1]:9000"


def test_a_name_is_resolved_once_and_the_request_goes_to_the_address_checked(
    receivers, member, team, settings, monkeypatch
):
    """DNS rebinding: the name answers the allowed loopback address to the check and an internal one
    after; the request still reaches the address checked, with the name as its Host."""
    receiver = receivers()
    settings.E31_WEBHOOK_ALLOWED_HOSTS = [f"127.0.0.1/32:{receiver.port}"]
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
        code, _ = _post(client, target, {"X-E31-Event": "job.released"}, b"{}", _Deadline(TIMEOUT_S))

    (request,) = seen
    assert code == 204
    assert str(request.url) == "https://203.0.113.7:8443/in?x=1"
    assert request.headers["Host"] == "hooks.example.org:8443"
    assert request.extensions["sni_hostname"] == "hooks.example.org"
