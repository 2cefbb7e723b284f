"""A request body the client stops sending is a 400 (BadRequest), not the OSError Django would answer 500."""

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from django.core.exceptions import BadRequest

__all__ = ["BodyNotReceived", "guard_body"]

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class BodyNotReceived(BadRequest):
    """The client stopped sending the body it declared: it went silent, or closed the connection."""


def _received(read: Callable[..., Any], *args: Any) -> Any:
    try:
        return read(*args)
    except OSError as exc:
        raise BodyNotReceived("The request's body did not arrive: the client stopped sending it.") from exc


class GuardedInput:
    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def read(self, *args: Any) -> bytes:
        return _received(self.stream.read, *args)

    def readline(self, *args: Any) -> bytes:
        return _received(self.stream.readline, *args)

    def readlines(self, *args: Any) -> list[bytes]:
        return _received(self.stream.readlines, *args)

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.readline, b"")


def guard_body(app: WSGIApp) -> WSGIApp:
    def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        environ["wsgi.input"] = GuardedInput(environ["wsgi.input"])
        return app(environ, start_response)

    return application
