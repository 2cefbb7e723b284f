"""A real S3-compatible server on loopback (moto in server mode): the one helper the tests and the
benchmarks start it with.

The server is a process of its own, so workers in other processes reach it as a node on another
machine reaches the object store. It dies with the process that started it (as tests/workers.py's
workers do) and keeps its objects in memory: a `kill` is the store going away mid-transfer, and a
`start` on the same port brings back an empty store (with its bucket made again).
"""

import json
import socket
import subprocess
import sys
from pathlib import Path

import boto3

from tests.workers import _die_with_parent, wait_until

BUCKET = "e31"
ACCESS_KEY, SECRET_KEY = "e31-test", "e31-test-secret"
BACKEND = "storages.backends.s3.S3Storage"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class S3Server:
    """One `moto_server` process on a loopback port, with the bucket `e31`."""

    def __init__(self, log_path: Path, *, port: int | None = None):
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.process: subprocess.Popen | None = None

    def start(self) -> "S3Server":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(self.port)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=_die_with_parent,
            )  # fmt: skip
        wait_until(self._answers, 30, 0.1, message=f"moto_server on port {self.port}")
        self.client().create_bucket(Bucket=BUCKET)
        return self

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def client(self):
        return boto3.client(
            "s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
            region_name="us-east-1",
        )  # fmt: skip

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def options(self, **extra: object) -> dict[str, object]:
        """The storage's OPTIONS for this server (what `E31_STORE_OPTIONS` carries)."""
        return {
            "bucket_name": BUCKET, "endpoint_url": self.endpoint, "access_key": ACCESS_KEY,
            "secret_key": SECRET_KEY, "region_name": "us-east-1", **extra,
        }  # fmt: skip

    def storages(self, current: dict, **extra: object) -> dict:
        """Django's STORAGES with the default store on this server."""
        return {**current, "default": {"BACKEND": BACKEND, "OPTIONS": self.options(**extra)}}

    def env(self, **extra: object) -> dict[str, str]:
        """The environment a worker (or `make run`) takes the same store from."""
        return {"E31_STORE_BACKEND": BACKEND, "E31_STORE_OPTIONS": json.dumps(self.options(**extra))}
