"""Where a webhook may go: E31_WEBHOOK_ALLOWED_HOSTS, hostnames matched exactly and CIDRs matched against
the addresses a name resolves to.

A job owner writes the URL, so the check is made on what the request will reach, not on what the URL
says: the host is resolved once, every address it gives is checked, and the request is sent to one of
those checked addresses (`Target.address`). Resolving again at connect time would let a DNS answer that
changes in between (rebinding) aim the request at an internal address.
"""

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
SCHEMES = ("http", "https")


class NotAllowed(ValueError):
    """The URL may not be reached; the message says why, in words a person can act on."""


@dataclass(frozen=True)
class AllowList:
    names: frozenset[str]
    networks: tuple[IPNetwork, ...]

    @classmethod
    def from_settings(cls) -> "AllowList":
        names: set[str] = set()
        networks: list[IPNetwork] = []
        for entry in settings.E31_WEBHOOK_ALLOWED_HOSTS:
            try:  # an address alone is a network of one
                networks.append(ipaddress.ip_network(entry.strip(), strict=False))
            except ValueError:
                names.add(entry.strip().lower().rstrip("."))
        return cls(frozenset(names), tuple(networks))

    def __bool__(self) -> bool:
        return bool(self.names or self.networks)

    def covers(self, address: IPAddress) -> bool:
        return any(address in network for network in self.networks)


@dataclass(frozen=True)
class Target:
    """A URL as checked: its host, and the address the request is sent to."""

    url: str
    scheme: str
    host: str
    port: int
    address: IPAddress


def webhooks_are_on() -> bool:
    # Every entry is a name or a network (checked at start-up): any entry allows something.
    return bool(settings.E31_WEBHOOK_ALLOWED_HOSTS)


OFF = "Webhooks are off on this site: the operator has allowed no host for them (E31_WEBHOOK_ALLOWED_HOSTS is empty)."


def _resolve(host: str, port: int) -> list[IPAddress]:
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise NotAllowed(f"The host {host} cannot be resolved.") from exc
    # An IPv6 scope (fe80::1%eth0) is dropped: the address is what the allow list is about.
    addresses = {ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in found}
    return sorted(addresses, key=lambda a: (a.version, int(a)))


def check(url: str, allowed: AllowList | None = None) -> Target:
    """The URL's target if it may be reached now, else NotAllowed saying why."""
    allowed = AllowList.from_settings() if allowed is None else allowed
    if not allowed:
        raise NotAllowed(OFF)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise NotAllowed("This is not a URL.") from exc
    if parts.scheme not in SCHEMES:
        raise NotAllowed("Only http and https URLs are allowed.")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise NotAllowed("The URL has no host.")
    if parts.username or parts.password:
        raise NotAllowed("A URL with a user or password is not allowed: the signature authenticates us.")
    port = port or (443 if parts.scheme == "https" else 80)
    try:
        literal: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    addresses = [literal] if literal is not None else _resolve(host, port)
    if literal is None and host in allowed.names:
        # A name the operator allowed is trusted wherever it points; it is still resolved once here.
        return Target(url, parts.scheme, host, port, addresses[0])
    refused = [str(a) for a in addresses if not allowed.covers(a)]
    if refused:
        where = f"{host} ({', '.join(refused)})" if literal is None else host
        raise NotAllowed(f"The host {where} is not one webhooks may reach (E31_WEBHOOK_ALLOWED_HOSTS).")
    return Target(url, parts.scheme, host, port, addresses[0])
