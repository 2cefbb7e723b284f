"""Runtime images built on this machine, offline (no registry is reachable from the nodes): busybox-static in
an empty root filesystem, and a debootstrap minbase with python3."""

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import docker

from jobs.models import RuntimeImage
from worker.sandbox.docker import engine_client

PASSWD = (
    "root:x:0:0:root:/root:/bin/sh\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n"
    "job:x:10001:10001:job:/tmp:/bin/sh\n"
)
GROUP = "root:x:0:\nnogroup:x:65534:\njob:x:10001:\n"


def apt_mirror() -> str:
    for path in Path("/etc/apt").glob("sources.list.d/*.sources"):
        for line in path.read_text().splitlines():
            if line.startswith("URIs:") and "security" not in line:
                return line.split()[1]
    sources = Path("/etc/apt/sources.list")
    if sources.exists():
        for line in sources.read_text().splitlines():
            parts = line.split()
            if len(parts) > 2 and parts[0] == "deb" and "security" not in line:
                return parts[1]
    return "http://deb.debian.org/debian"


def _busybox_root(root: Path) -> None:
    busybox = "/bin/busybox"
    linked = subprocess.run(["ldd", busybox], capture_output=True, text=True) if Path(busybox).exists() else None
    if linked is None or "not a dynamic executable" not in linked.stdout + linked.stderr:
        raise RuntimeError("a static busybox is needed: apt-get install busybox-static")
    for folder in ("bin", "etc", "tmp", "data", "output", "proc", "sys", "dev"):
        (root / folder).mkdir()
    shutil.copy2(busybox, root / "bin" / "busybox")
    applets = subprocess.run([root / "bin" / "busybox", "--list"], capture_output=True, text=True, check=True).stdout
    for applet in applets.split():
        if applet != "busybox":
            os.symlink("busybox", root / "bin" / applet)
    (root / "usr").mkdir()
    os.symlink("../bin", root / "usr" / "bin")
    (root / "etc" / "passwd").write_text(PASSWD)
    (root / "etc" / "group").write_text(GROUP)


def _python_root(root: Path) -> None:
    command = ["debootstrap", "--variant=minbase", "--include=python3", "bookworm", str(root), apt_mirror()]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    for folder in ("data", "output"):
        (root / folder).mkdir(exist_ok=True)
    # Smaller image: nothing a batch job needs.
    for junk in ("var/cache/apt/archives", "usr/share/doc", "usr/share/man", "usr/share/locale", "var/lib/apt/lists"):
        shutil.rmtree(root / junk, ignore_errors=True)


def _import(client: docker.DockerClient, root: Path, reference: str) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for entry in sorted(root.iterdir()):
            tar.add(entry, arcname=entry.name)
    buffer.seek(0)
    repository, tag = reference.rsplit(":", 1)
    client.api.import_image_from_data(buffer.getvalue(), repository=repository, tag=tag)


@dataclass(frozen=True)
class Recipe:
    name: str
    reference: str
    description: str
    build_root: Callable[[Path], None]


RECIPES = {
    "busybox": Recipe("busybox", "e31/busybox:1", "BusyBox shell and utilities (Debian busybox-static)", _busybox_root),
    "python": Recipe("python", "e31/python:3", "Debian minbase with python3", _python_root),
}


def build(name: str, *, force: bool = False, client: docker.DockerClient | None = None) -> tuple[RuntimeImage, bool]:
    """Build (unless cached) and register one runtime image; returns (image, built)."""
    recipe = RECIPES[name]
    client = client or engine_client(timeout=600)
    built = force or not client.images.list(name=recipe.reference)
    if built:
        with tempfile.TemporaryDirectory(prefix=f"e31-image-{name}-") as tmp:
            root = Path(tmp) / "root"
            root.mkdir()
            recipe.build_root(root)
            _import(client, root, recipe.reference)
    image, _ = RuntimeImage.objects.update_or_create(
        name=recipe.name, defaults={"reference": recipe.reference, "description": recipe.description}
    )
    return image, built
