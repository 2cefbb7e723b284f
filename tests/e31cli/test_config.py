"""Where `e31` finds its server and token, and the file `e31 login` writes."""

import stat

import pytest

from e31cli import config
from e31cli.exits import CliError, Exit


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("E31_URL", raising=False)
    monkeypatch.delenv("E31_TOKEN", raising=False)
    return tmp_path


def test_the_file_is_written_for_its_owner_only(home):
    path = config.save(config.Config(url="http://127.0.0.1:9", token="secret"))

    assert path == home / "xdg" / "e31" / "config"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert config.load() == config.Config(url="http://127.0.0.1:9", token="secret")


def test_an_older_file_with_wider_bits_is_narrowed(home):
    path = home / "xdg" / "e31" / "config"
    path.parent.mkdir(parents=True)
    path.write_text("[e31]\nurl = x\n")
    path.chmod(0o644)

    config.save(config.Config(url="http://127.0.0.1:9", token="secret"))

    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_environment_wins_over_the_file(monkeypatch):
    config.save(config.Config(url="http://127.0.0.1:9", token="from-file"))
    monkeypatch.setenv("E31_URL", "http://127.0.0.1:8/")
    monkeypatch.setenv("E31_TOKEN", "from-env")

    assert config.load() == config.Config(url="http://127.0.0.1:8", token="from-env")


def test_no_token_anywhere_is_an_authentication_error():
    with pytest.raises(CliError) as missing:
        config.load()

    assert missing.value.code == Exit.AUTH and "e31 login" in str(missing.value)
