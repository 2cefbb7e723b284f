"""A private PostgreSQL cluster for the tests that restart the database: initdb into a temporary
folder as the postgres user, its own free loopback port, trust authentication, no Unix socket. The
postmaster is this process's child and dies with it (SIGQUIT: an immediate shutdown); `restart` stops it
as `pg_ctl stop -m fast` does (every session cut) and starts it again on the same folder and port."""

import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import psycopg

from tests.workers import ROOT, _die_with_parent, wait_until

USER = "postgres"


def bin_dir() -> Path:
    """The newest PostgreSQL installed (Debian keeps each version's programs apart)."""
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda path: int(path.parent.name))
    if not versions:
        raise RuntimeError("no PostgreSQL server is installed under /usr/lib/postgresql")
    return versions[-1]


class PostgresCluster:
    def __init__(self, name: str):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.bin = bin_dir()
        owner = pwd.getpwnam(USER)
        self.root = Path(tempfile.mkdtemp(prefix=f"e31-pg-{name}-"))
        shutil.chown(self.root, owner.pw_uid, owner.pw_gid)
        self.data = self.root / "data"
        self.log_path = ROOT / "var" / "log" / f"test-postgres-{name}.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.process: subprocess.Popen | None = None
        self._as_postgres([self.bin / "initdb", "-D", self.data, "-U", USER, "-A", "trust", "-E", "UTF8",
                           "--no-sync", "--no-instructions"])  # fmt: skip

    def url(self, database: str = "postgres") -> str:
        return f"postgres://{USER}@127.0.0.1:{self.port}/{database}"

    def _as_postgres(self, argv: list) -> None:
        with open(self.log_path, "ab") as log:
            subprocess.run(argv, user=USER, group=USER, cwd=self.root, check=True, stdout=log, stderr=subprocess.STDOUT)

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [self.bin / "postgres", "-D", self.data, "-p", str(self.port), "-c", "listen_addresses=127.0.0.1",
                 "-c", "unix_socket_directories=", "-c", "fsync=off", "-c", "max_connections=100"],
                user=USER, group=USER, cwd=self.root, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent, start_new_session=True,
            )  # fmt: skip
        wait_until(self.answers, 30, 0.1, message=f"PostgreSQL on port {self.port}")

    def answers(self) -> bool:
        try:
            with psycopg.connect(self.url(), connect_timeout=1):
                return True
        except psycopg.OperationalError:
            return False

    def stop(self) -> None:
        """`pg_ctl stop -m fast`: every session is cut, the server shuts down cleanly."""
        self._as_postgres([self.bin / "pg_ctl", "stop", "-D", self.data, "-m", "fast", "-w", "-t", "30"])
        if self.process is not None:
            self.process.wait(30)
            self.process = None

    def create_database(self, name: str) -> str:
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def remove(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(10)
            self.process = None
        shutil.rmtree(self.root, ignore_errors=True)
