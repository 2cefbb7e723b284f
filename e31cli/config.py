"""The server and token: E31_URL and E31_TOKEN first, then the file `e31 login` writes."""

import configparser
import os
from dataclasses import dataclass
from pathlib import Path

from e31cli.exits import CliError, Exit

DEFAULT_URL = "http://127.0.0.1:8000"


@dataclass
class Config:
    url: str
    token: str


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "e31" / "config"


def _from_file() -> dict[str, str]:
    parser = configparser.ConfigParser()
    try:
        parser.read(config_path(), encoding="utf-8")
    except configparser.Error as exc:
        raise CliError(f"cannot read {config_path()}: {exc}", Exit.USAGE) from None
    return dict(parser["e31"]) if parser.has_section("e31") else {}


def load(*, need_token: bool = True) -> Config:
    saved = _from_file()
    url = os.environ.get("E31_URL") or saved.get("url") or DEFAULT_URL
    token = os.environ.get("E31_TOKEN") or saved.get("token") or ""
    if need_token and not token:
        raise CliError("no token: set E31_TOKEN or run `e31 login`", Exit.AUTH)
    return Config(url=url.rstrip("/"), token=token)


def save(config: Config) -> Path:
    """Write the file readable by its owner only: it holds a key to the API."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    parser = configparser.ConfigParser()
    parser["e31"] = {"url": config.url, "token": config.token}
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an older file may have had wider bits
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        parser.write(handle)
    return path
