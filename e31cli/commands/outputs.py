"""`e31 outputs`: a job's outputs listed, or downloaded and each checked against its sha256."""

import hashlib
import os
from pathlib import Path, PurePosixPath
from typing import Annotated
from urllib.parse import quote

import typer
from rich.progress import Progress

from e31cli import session
from e31cli.client import Api
from e31cli.exits import CliError, Exit
from e31cli.session import AsJson, JobId, err, job_path, out, print_rows, say, transfer_progress
from e31cli.terminal import visible


def outputs(
    job_id: JobId,
    download: Annotated[
        Path | None, typer.Option("--download", help="Download them into this folder, checking each sha256.")
    ] = None,
    as_json: AsJson = False,
) -> None:
    """A job's outputs (path, size, sha256); with --download, fetch and verify them."""
    client = session.api()
    files = client.json("GET", f"{job_path(job_id)}outputs/")
    if download is None:
        print_rows(files, as_json, ["PATH", "SIZE", "SHA256"], lambda f: (f["path"], f["size"], f["sha256"]))
        return
    download.mkdir(parents=True, exist_ok=True)
    with transfer_progress() as progress:
        for f in files:
            fetch_output(client, job_id, f, download, progress)
    say(err, f"{len(files)} output(s) of job {job_id} in {download}, each sha256 verified")


def fetch_output(client: Api, job_id: str, listed: dict, folder: Path, progress: Progress) -> None:
    relative = PurePosixPath(listed["path"])
    if relative.is_absolute() or ".." in relative.parts:
        raise CliError(f"refusing the output path {listed['path']!r}: it leaves the folder", Exit.CHECKSUM)
    target = folder.joinpath(*relative.parts)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    digest = hashlib.sha256()
    task = progress.add_task(visible(f"downloading {relative}"), total=listed["size"])
    with client.stream(f"{job_path(job_id)}outputs/{quote(listed['path'])}") as response, partial.open("wb") as handle:
        for chunk in response.iter_bytes():
            digest.update(chunk)
            handle.write(chunk)
            progress.advance(task, len(chunk))
    if digest.hexdigest() != listed["sha256"]:
        partial.unlink()
        raise CliError(
            f"{relative}: sha256 {digest.hexdigest()} does not match the job's {listed['sha256']}", Exit.CHECKSUM
        )
    os.replace(partial, target)
    say(out, f"verified {relative}  {listed['size']} bytes  sha256 {listed['sha256']}")
