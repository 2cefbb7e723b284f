"""The API as the command line uses it: httpx, the token, and every failure turned into one CliError."""

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from e31cli.config import Config
from e31cli.exits import CliError, Exit

API = "/api/v1"
MAX_THROTTLED_WAITS = 3
MAX_WAIT_S = 60.0


class Api:
    def __init__(self, config: Config, *, timeout: float = 30.0) -> None:
        self.config = config
        headers = {"User-Agent": "e31-cli", "Accept": "application/json"}
        if config.token:
            headers["Authorization"] = f"Token {config.token}"
        self.http = httpx.Client(base_url=config.url, headers=headers, timeout=timeout)

    @contextmanager
    def _reaching(self) -> Iterator[None]:
        try:
            yield
        except httpx.TimeoutException:
            raise CliError(f"the server at {self.config.url} did not answer in time", Exit.UNREACHABLE) from None
        except httpx.TransportError as exc:
            raise CliError(f"cannot reach the server at {self.config.url}: {exc}", Exit.UNREACHABLE) from None

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request, a short 429 waited out as its Retry-After says; a failure is a CliError."""
        for _attempt in range(MAX_THROTTLED_WAITS + 1):
            with self._reaching():
                response = self.http.request(method, _url(path), **kwargs)
            # A longer wait (a lockout of unknown tokens: minutes) is not waited out.
            if response.status_code != 429 or retry_after(response) > MAX_WAIT_S:
                break
            time.sleep(retry_after(response))
        check(response)
        return response

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self.request(method, path, **kwargs).json()

    @contextmanager
    def stream(self, path: str) -> Iterator[httpx.Response]:
        # A big output of an S3 store is a redirect to the store (httpx drops the token for another host).
        with self._reaching(), self.http.stream("GET", _url(path), follow_redirects=True) as response:
            if response.is_error:
                response.read()
            check(response)
            yield response

    def pages(self, path: str, params: dict[str, str], limit: int) -> list[dict]:
        """The rows of a paginated list, following `next` until `limit` rows."""
        rows: list[dict] = []
        body = self.json("GET", path, params=params)
        while True:
            if isinstance(body, list):  # an unpaginated list
                return body[:limit]
            rows.extend(body["results"])
            if len(rows) >= limit or not body.get("next"):
                return rows[:limit]
            body = self.json("GET", body["next"])


def _url(path: str) -> str:
    return path if path.startswith("http") else f"{API}{path}"


def retry_after(response: httpx.Response) -> float:
    try:
        return max(float(response.headers.get("Retry-After", "1")), 0.0)
    except ValueError:
        return 1.0


def check(response: httpx.Response) -> None:
    status = response.status_code
    if status < 400:
        return
    message = describe(response)
    if status in (401, 403):
        raise CliError(f"not allowed: {message}", Exit.AUTH)
    if status == 404:
        raise CliError(f"not found: {message}", Exit.NOT_FOUND)
    if status == 429:
        raise CliError(f"throttled: {message} (retry after {retry_after(response):.0f}s)", Exit.THROTTLED)
    if status >= 500:
        raise CliError(f"the server failed ({status}): {message}", Exit.SERVER_ERROR)
    raise CliError(f"refused ({status}): {message}", Exit.REFUSED, refused=field_errors(response))


def describe(response: httpx.Response) -> str:
    """`{"detail": "…"}` or `{"field": ["…"]}` as one line."""
    try:
        body = response.json()
    except ValueError:
        return response.reason_phrase or str(response.status_code)
    if isinstance(body, dict):
        if "detail" in body:  # the figures beside it (a lockout's minutes) are in its words too
            return str(body["detail"])
        return " | ".join(f"{field}: {text}" for field, text in field_errors(response).items())
    return str(body)


def field_errors(response: httpx.Response) -> dict[str, str]:
    """A refusal's words by field (`{"field": ["…"]}`), each field's on one line; none for other answers."""
    try:
        body = response.json()
    except ValueError:
        return {}
    if not isinstance(body, dict) or "detail" in body:
        return {}
    return {
        str(field): "; ".join(map(str, errors)) if isinstance(errors, list) else str(errors)
        for field, errors in body.items()
    }
