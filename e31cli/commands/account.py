"""`e31 login`, `e31 config` and `e31 tokens`: the server and token the command line uses, and the API tokens."""

import os
from typing import Annotated

import typer

from e31cli import session
from e31cli.client import Api
from e31cli.config import Config, config_path, load, save
from e31cli.session import AsJson, err, out, print_rows, say


def login(
    url: Annotated[str | None, typer.Option("--url", help="The site, e.g. http://127.0.0.1:8000.")] = None,
    token: Annotated[str | None, typer.Option("--token", help="An API token (asked for when missing).")] = None,
) -> None:
    """Check a URL and token against the server and keep them in ~/.config/e31/config (mode 0600)."""
    current = load(need_token=False)
    url = (url or typer.prompt("URL", default=current.url)).rstrip("/")
    token = token or typer.prompt("Token", hide_input=True)
    client = Api(Config(url=url, token=token))
    client.json("GET", "/tokens/")  # a bad token or URL ends here, before anything is written
    path = save(Config(url=url, token=token))
    say(out, f"logged in to {url}; token kept in {path}")


def tokens_list(as_json: AsJson = False) -> None:
    """Your tokens (an operator's: everyone's), by name and first characters; never the keys."""
    rows = session.api().pages("/tokens/", {}, 1000)
    columns = ["ID", "NAME", "STARTS WITH", "USER", "MADE"]
    print_rows(rows, as_json, columns, lambda t: (t["id"], t["name"], t["prefix"], t["user"], t["created_at"]))


def tokens_create(name: Annotated[str, typer.Argument(help="What it is for, e.g. 'nightly cron'.")]) -> None:
    """Make a token; its key is printed once, on stdout (only its hash is kept)."""
    token = session.api().json("POST", "/tokens/", json={"name": name})
    say(out, token["key"])
    say(err, f"token {token['id']} ({token['name']}): keep the key now, it is not shown again")


def tokens_revoke(token_id: Annotated[int, typer.Argument(metavar="ID")]) -> None:
    """Revoke a token (yours; an operator, anyone's): its key stops working at once."""
    session.api().request("DELETE", f"/tokens/{token_id}/")
    say(out, f"token {token_id} revoked")


def config() -> None:
    """Where the configuration comes from (the token is not shown)."""
    current = load(need_token=False)
    say(out, f"url {current.url}")
    source = "E31_TOKEN" if os.environ.get("E31_TOKEN") else str(config_path())
    say(out, f"token {'set' if current.token else 'missing'} ({source})")
