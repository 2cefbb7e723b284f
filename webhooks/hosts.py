"""Where a webhook may go: E31_WEBHOOK_ALLOWED_HOSTS, each entry a host name or a network and the ports it
opens. The check is made on the addresses the request will reach (docs/reference/notifications.md); ports
too, or an owner could probe a host's other services through the delivery log."""

import functools
import ipaddress
import re
import socket
import threading
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
SCHEMES = ("http", "https")
DEFAULT_PORTS: tuple[tuple[int, int], ...] = ((80, 80), (443, 443))  # an entry naming no port: the web's
RESOLVE_TIMEOUT_S = 5.0

_HOST_NAME = re.compile(
    r"^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?\.)*[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?\.?$", re.I
)
_PORTS = re.compile(r"^([0-9]{1,5})(?:-([0-9]{1,5}))?$")


class NotAllowed(ValueError):
    pass


class Unresolved(NotAllowed):
    pass


@dataclass(frozen=True)
class Entry:
    name: str  # "" for a network
    network: IPNetwork | None
    ports: tuple[tuple[int, int], ...]

    def opens(self, port: int) -> bool:
        return any(low <= port <= high for low, high in self.ports)


def _ports(text: str, entry: str) -> tuple[tuple[int, int], ...]:
    found = _PORTS.match(text)
    if found is None:
        raise ValueError(f"the entry {entry!r} names no port or range such as 9000 or 8000-8099 after its ':'")
    low = int(found.group(1))
    high = int(found.group(2) or low)
    if not 1 <= low <= high <= 65535:
        raise ValueError(f"the entry {entry!r} names ports outside 1-65535 or a range that ends before it starts")
    return ((low, high),)


def parse_entry(text: str) -> Entry:
    """`name`, `address` or `network`, each optionally with `:port` or `:low-high`; an IPv6 one with a port in
    brackets (`[::1]:9000`). No port: 80 and 443."""
    entry = text.strip()
    ports = DEFAULT_PORTS
    bracketed = entry.startswith("[")
    if bracketed:
        inside, closed, rest = entry[1:].partition("]")
        if not closed or (rest and not rest.startswith(":")):
            raise ValueError(f"the entry {entry!r} opens a '[' it does not close before its ':port'")
        host = inside
        if rest:
            ports = _ports(rest[1:], entry)
    elif entry.count(":") > 1:  # an IPv6 address or network without brackets: no port can follow
        host = entry
    else:
        host, colon, port_text = entry.partition(":")
        if colon:
            ports = _ports(port_text, entry)
    if bracketed or "/" in host or ":" in host or re.fullmatch(r"[0-9.]+", host):
        try:
            network = ipaddress.ip_network(host, strict=False)
        except ValueError:
            raise ValueError(f"the entry {entry!r} is not an address or a network (CIDR)") from None
        return Entry("", network, ports)
    if not _HOST_NAME.match(host):
        raise ValueError(f"the entry {entry!r} is not a host name, an address or a network")
    return Entry(host.lower().rstrip("."), None, ports)


@dataclass(frozen=True)
class AllowList:
    entries: tuple[Entry, ...]

    @classmethod
    def from_settings(cls) -> "AllowList":
        return _parsed(tuple(settings.E31_WEBHOOK_ALLOWED_HOSTS))

    def __bool__(self) -> bool:
        return bool(self.entries)

    def names(self, host: str, port: int | None = None) -> bool:
        return any(e.name == host and (port is None or e.opens(port)) for e in self.entries)

    def covers(self, address: IPAddress, port: int | None = None) -> bool:
        return any(
            e.network is not None and address in e.network and (port is None or e.opens(port)) for e in self.entries
        )


@functools.lru_cache(maxsize=8)
def _parsed(entries: tuple[str, ...]) -> AllowList:
    return AllowList(tuple(parse_entry(entry) for entry in entries))


@dataclass(frozen=True)
class Target:
    url: str
    scheme: str
    host: str
    port: int
    address: IPAddress

    @property
    def receiver(self) -> str:
        """`address:port` of the address checked, not the host as written, so `localhost`, `127.1` and
        `::ffff:127.0.0.1` are the one receiver they reach."""
        address = self.address
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return f"[{address}]:{self.port}" if address.version == 6 else f"{address}:{self.port}"


def webhooks_are_on() -> bool:
    # Every entry is a name or a network (checked at start-up): any entry allows something.
    return bool(settings.E31_WEBHOOK_ALLOWED_HOSTS)


OFF = "Webhooks are off on this site: the operator has allowed no host for them (E31_WEBHOOK_ALLOWED_HOSTS is empty)."


def _host_and_port(url: str) -> tuple[str, str, int]:
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
    return parts.scheme, host, port or (443 if parts.scheme == "https" else 80)


def _resolve(host: str, port: int, timeout: float) -> list[IPAddress]:
    """getaddrinfo has no deadline of its own: it runs in a thread left behind if it takes longer."""
    found: list[object] = []

    def look_up() -> None:
        try:
            found.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except (OSError, UnicodeError) as exc:
            found.append(exc)

    thread = threading.Thread(target=look_up, name=f"resolve {host}", daemon=True)
    thread.start()
    thread.join(max(timeout, 0.0))
    if not found:
        raise Unresolved(f"The host {host} was not resolved within {timeout:g} s.")
    if isinstance(answer := found[0], BaseException):
        raise Unresolved(f"The host {host} cannot be resolved.") from answer
    assert isinstance(answer, list)
    # An IPv6 scope (fe80::1%eth0) is dropped: the address is what the allow list is about.
    addresses = {ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in answer}
    return sorted(addresses, key=lambda a: (a.version, int(a)))


def check(url: str, allowed: AllowList | None = None, *, timeout: float = RESOLVE_TIMEOUT_S) -> Target:
    allowed = AllowList.from_settings() if allowed is None else allowed
    if not allowed:
        raise NotAllowed(OFF)
    scheme, host, port = _host_and_port(url)
    try:
        literal: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    addresses = [literal] if literal is not None else _resolve(host, port, timeout)
    if literal is None and allowed.names(host, port):
        # A name the operator allowed is trusted wherever it points; it is still resolved once here.
        return Target(url, scheme, host, port, addresses[0])
    refused = [a for a in addresses if not allowed.covers(a, port)]
    if not refused:
        return Target(url, scheme, host, port, addresses[0])
    if (literal is None and allowed.names(host)) or all(allowed.covers(a) for a in refused):
        raise NotAllowed(f"The port {port} of {host} is not one webhooks may reach (E31_WEBHOOK_ALLOWED_HOSTS).")
    where = f"{host} ({', '.join(map(str, refused))})" if literal is None else host
    raise NotAllowed(f"The host {where} is not one webhooks may reach (E31_WEBHOOK_ALLOWED_HOSTS).")
