"""Output collection: the host takes what a job left under /output without trusting any of it."""

import hashlib
import os
import socket
import stat
from pathlib import Path

import pytest
from django.core.files.storage import default_storage

from jobs.storage.store import output_key
from tests.factories import ODD_OUTPUT_NAMES
from worker import outputs
from worker.outputs import Limits, collect, store

ROOMY = Limits(file_bytes=1 << 20, total_bytes=1 << 22, files=100)


@pytest.fixture
def out(tmp_path) -> Path:
    folder = tmp_path / "output"
    folder.mkdir()
    return folder


@pytest.fixture
def outside(tmp_path) -> Path:
    """A folder beside /output the job must never be able to read through it."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("the host's secret")
    return folder


def write(folder: Path, rel: str, content: bytes | str) -> Path:
    path = folder / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def sha256(content: bytes | str) -> str:
    return hashlib.sha256(content.encode() if isinstance(content, str) else content).hexdigest()


def paths(collection) -> list[str]:
    return [f.path for f in collection.files]


# --- sparse files -----------------------------------------------------------------------------------


def sparse(folder: Path, rel: str, size: int) -> Path:
    """A file of `size` bytes with no block written, as `dd bs=1 count=0 seek=…` makes it."""
    path = folder / rel
    with open(path, "wb") as handle:
        handle.truncate(size)
    return path


def test_a_sparse_file_is_measured_by_its_blocks_and_counted_at_its_apparent_size(out):
    sparse(out, "hole.bin", 8 << 20)

    [collected] = collect(out, [], Limits(file_bytes=16 << 20, total_bytes=16 << 20, files=10)).files

    assert collected.size == 8 << 20
    assert collected.allocated < collected.size and collected.sparse
    assert collected.sha256 == hashlib.sha256(bytes(8 << 20)).hexdigest()


def test_a_sparse_file_over_the_per_file_cap_stops_collection_at_its_apparent_size(out):
    sparse(out, "hole.bin", 2 << 20)

    collection = collect(out, [], ROOMY)

    assert collection.files == [] and "hole.bin is 2097152 bytes, over the per-file cap" in collection.over_cap


def test_a_written_file_is_not_sparse(out):
    write(out, "full.bin", b"x" * 10000)

    [collected] = collect(out, [], ROOMY).files

    assert collected.allocated >= collected.size and not collected.sparse


def test_the_log_names_the_sparse_outputs_with_both_measures(out):
    sparse(out, "a.bin", 1 << 20)
    write(out, "b.txt", "written")

    note = outputs.sparse_note(collect(out, [], Limits(file_bytes=2 << 20, total_bytes=4 << 20, files=10)).files)

    assert note.startswith("sparse outputs, counted and stored at their apparent size: a.bin (1048576 bytes, ")
    assert "b.txt" not in note
    assert outputs.sparse_note(collect(out, ["b.txt"], ROOMY).files) == ""


# --- what is collected -----------------------------------------------------------------------------


def test_a_nested_file_is_collected_with_its_size_and_sha256(out):
    write(out, "reports/2030/summary.json", '{"loss": 0.1}')

    collection = collect(out, [], ROOMY)

    [collected] = collection.files
    assert collected.path == "reports/2030/summary.json"
    assert collected.size == len('{"loss": 0.1}') and collected.sha256 == sha256('{"loss": 0.1}')
    assert collection.refused == [] and collection.over_cap == ""


def test_no_patterns_collect_every_file(out):
    for rel in ("model.json", "notes.txt", "reports/a.csv"):
        write(out, rel, rel)

    assert sorted(paths(collect(out, [], ROOMY))) == ["model.json", "notes.txt", "reports/a.csv"]


def test_patterns_choose_the_files_and_a_trailing_slash_takes_a_whole_folder(out):
    for rel in ("model.json", "metrics.json", "notes.txt", "reports/a.txt", "reports/deep/b.csv", "tmp/c.bin"):
        write(out, rel, rel)

    collection = collect(out, ["*.json", "reports/"], ROOMY)

    assert sorted(paths(collection)) == ["metrics.json", "model.json", "reports/a.txt", "reports/deep/b.csv"]


def test_an_empty_output_folder_collects_nothing(out):
    collection = collect(out, [], ROOMY)

    assert (collection.files, collection.refused, collection.over_cap) == ([], [], "")


def test_an_empty_file_is_collected(out):
    write(out, "done", b"")

    [collected] = collect(out, [], ROOMY).files
    assert (collected.size, collected.sha256) == (0, sha256(b""))


# --- what is refused, and never followed ---------------------------------------------------------------


def test_a_symlink_to_a_host_file_is_refused_and_named(out):
    os.symlink("/etc/passwd", out / "passwd")

    collection = collect(out, [], ROOMY)

    assert collection.files == []
    assert collection.refused == ["passwd (symlink)"]


def test_a_symlinked_folder_pointing_outside_is_refused_and_never_entered(out, outside):
    os.symlink(outside, out / "linked")
    write(out, "real.txt", "mine")

    collection = collect(out, [], ROOMY)

    assert paths(collection) == ["real.txt"]
    assert collection.refused == ["linked (symlink)"]


def test_a_hardlink_is_refused_and_named(out, outside):
    os.link(outside / "secret.txt", out / "looks-innocent.txt")

    collection = collect(out, [], ROOMY)

    assert collection.files == []
    assert collection.refused == ["looks-innocent.txt (hardlink)"]


def test_both_names_of_a_hardlinked_pair_inside_output_are_refused(out):
    write(out, "a.txt", "one inode")
    os.link(out / "a.txt", out / "b.txt")

    assert collect(out, [], ROOMY).refused == ["a.txt (hardlink)", "b.txt (hardlink)"]


def test_a_fifo_is_refused_without_blocking_on_it(out):
    os.mkfifo(out / "pipe")

    collection = collect(out, [], ROOMY)

    assert collection.files == [] and collection.refused == ["pipe (fifo)"]


def test_a_device_node_is_refused(out):
    os.mknod(out / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null; the tests run as root

    collection = collect(out, [], ROOMY)

    assert collection.files == [] and collection.refused == ["null (device)"]


def test_a_socket_is_refused(out, monkeypatch):
    monkeypatch.chdir(out)  # a short relative path: socket paths are limited to 108 bytes
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind("sock")

        collection = collect(out, [], ROOMY)

    assert collection.files == [] and collection.refused == ["sock (socket)"]


def test_hostile_files_do_not_stop_the_honest_ones_being_collected(out, outside):
    write(out, "model.json", "{}")
    os.symlink("/etc/passwd", out / "passwd")
    os.mkfifo(out / "pipe")
    os.link(outside / "secret.txt", out / "hard")
    write(out, "sub/metrics.json", "[]")

    collection = collect(out, [], ROOMY)

    assert sorted(paths(collection)) == ["model.json", "sub/metrics.json"]
    assert sorted(collection.refused) == ["hard (hardlink)", "passwd (symlink)", "pipe (fifo)"]
    assert collection.over_cap == ""


def test_a_file_swapped_for_a_symlink_after_it_was_listed_is_refused(out, monkeypatch):
    write(out, "model.json", "{}")
    listed = outputs._walk

    def swap_while_listing(root):
        for rel, st in listed(root):
            (root / rel).unlink()
            os.symlink("/etc/passwd", root / rel)
            yield rel, st

    monkeypatch.setattr(outputs, "_walk", swap_while_listing)

    collection = collect(out, [], ROOMY)

    assert collection.files == []
    [refusal] = collection.refused
    assert refusal.startswith("model.json (unreadable")


# --- names: one odd entry is refused by itself, named with escapes; every other output is kept -------------


def test_odd_names_without_control_characters_are_kept(out):
    for rel in ODD_OUTPUT_NAMES:
        write(out, rel, rel)

    collection = collect(out, [], ROOMY)

    assert sorted(paths(collection)) == sorted(ODD_OUTPUT_NAMES) and collection.refused == []


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("new\nline.txt", "new\\nline.txt"),
        ("carriage\rreturn", "carriage\\rreturn"),
        ("tab\there", "tab\\there"),
        ("escape\x1b[31mred", "escape\\x1b[31mred"),
        ("delete\x7f", "delete\\x7f"),
        ("c1\x85next-line", "c1\\x85next-line"),
        ("line\u2028separator", "line\\u2028separator"),
        ("evil\u202etxt.exe", "evil\\u202etxt.exe"),
        ("back\\slash\nnewline", "back\\\\slash\\nnewline"),
    ],
)
def test_a_name_with_control_characters_is_refused_escaped_and_the_rest_kept(out, name, shown):
    write(out, "model.json", "{}")
    write(out, name, "hostile")
    write(out, f"sub/{name}/inside.txt", "under a hostile folder name")

    collection = collect(out, [], ROOMY)

    assert paths(collection) == ["model.json"]
    assert sorted(collection.refused) == sorted(
        [f"{shown} (name has control characters)", f"sub/{shown}/inside.txt (name has control characters)"]
    )
    assert all("\n" not in refusal and "\x1b" not in refusal for refusal in collection.refused)


def test_a_name_that_is_not_utf8_is_refused_with_its_bytes_escaped(out):
    write(out, "model.json", "{}")
    with open(os.path.join(os.fsencode(out), b"x\xff\xfe.txt"), "wb") as hostile:
        hostile.write(b"latin-1 name")

    collection = collect(out, [], ROOMY)

    assert paths(collection) == ["model.json"]
    assert collection.refused == ["x\\xff\\xfe.txt (name is not UTF-8)"]


def test_a_path_too_long_to_keep_is_refused_and_a_shorter_one_beside_it_kept(out):
    folder = "/".join(["d" * 240] * 4)  # 963 bytes
    write(out, f"{folder}/kept.txt", "fits")
    write(out, f"{folder}/{'n' * 20}.txt", "too long by a few bytes")

    collection = collect(out, [], ROOMY)

    assert paths(collection) == [f"{folder}/kept.txt"]
    limit = outputs.PATH_MAX_BYTES
    assert collection.refused == [f"{folder}/{'n' * 20}.txt (path too long to keep: over {limit} bytes, "
                                  "a backslash or % counting 3)"]  # fmt: skip


def test_a_name_that_outgrows_the_store_once_its_backslashes_are_escaped_is_refused(out):
    name = "\\" * 3 + "n" * 247  # 250 bytes here, 256 in the store (a backslash is kept as %5C)
    write(out, name, "x")
    write(out, "model.json", "{}")

    collection = collect(out, [], ROOMY)

    assert paths(collection) == ["model.json"]
    assert collection.refused == [
        "\\" * 6 + "n" * 247 + " (name too long to keep: over 255 bytes, a backslash or % counting 3)"
    ]


def test_a_folder_nested_deeper_than_the_host_allows_is_refused_once_and_the_rest_kept(out):
    # Deeper than PATH_MAX (4096 bytes) on the host, as a job can make it with mkdir and cd: each
    # step is short, but the host's path to the bottom is too long for any call (ENAMETOOLONG).
    write(out, "model.json", "{}")
    fd = os.open(out, os.O_RDONLY)
    for _ in range(20):
        os.mkdir("f" * 250, dir_fd=fd)
        deeper = os.open("f" * 250, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = deeper
    with open(os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, dir_fd=fd), "w") as bottom:
        bottom.write("deep")
    os.close(fd)

    collection = collect(out, [], ROOMY)

    assert paths(collection) == ["model.json"]
    [refusal] = collection.refused
    assert refusal.endswith(f"/ (folder too deep: no path below it fits in {outputs.PATH_MAX_BYTES} bytes)")
    assert refusal.startswith("f" * 250 + "/")


def test_an_unreadable_folder_is_refused_by_name(out, monkeypatch):
    write(out, "model.json", "{}")
    write(out, "locked/secret.txt", "x")
    listed = os.scandir

    def refuse_locked(path):
        if str(path).endswith("locked"):  # root reads a folder whatever its mode: make it fail
            raise PermissionError(13, "Permission denied", str(path))
        return listed(path)

    monkeypatch.setattr(outputs.os, "scandir", refuse_locked)

    collection = collect(out, [], ROOMY)

    assert paths(collection) == ["model.json"]
    assert collection.refused == ["locked/ (unreadable folder: Permission denied)"]


def test_a_refused_file_outside_the_patterns_is_ignored(out):
    os.symlink("/etc/passwd", out / "passwd")
    write(out, "model.json", "{}")

    collection = collect(out, ["*.json"], ROOMY)

    assert paths(collection) == ["model.json"] and collection.refused == []


# --- caps ------------------------------------------------------------------------------------------


def test_a_file_over_the_per_file_cap_stops_collection(out):
    write(out, "a.txt", "12345")
    write(out, "b.txt", "12345678901")
    write(out, "c.txt", "12345")

    collection = collect(out, [], Limits(file_bytes=10, total_bytes=1000, files=100))

    assert paths(collection) == ["a.txt"]
    assert "b.txt" in collection.over_cap and "per-file cap of 10" in collection.over_cap


def test_a_file_that_grows_past_the_cap_after_it_was_listed_stops_collection(out, monkeypatch):
    write(out, "a.txt", "12345")
    listed = outputs._walk

    def grow_while_listing(root):
        for rel, st in listed(root):
            with open(root / rel, "ab") as still_written:
                still_written.write(b"x" * 100)
            yield rel, st

    monkeypatch.setattr(outputs, "_walk", grow_while_listing)

    collection = collect(out, [], Limits(file_bytes=10, total_bytes=1000, files=100))

    assert collection.files == [] and "a.txt" in collection.over_cap


def test_a_file_exactly_at_the_per_file_cap_is_collected(out):
    write(out, "a.txt", "1234567890")

    collection = collect(out, [], Limits(file_bytes=10, total_bytes=1000, files=100))

    assert paths(collection) == ["a.txt"] and collection.over_cap == ""


def test_outputs_over_the_total_cap_stop_collection(out):
    for name in ("a.txt", "b.txt", "c.txt"):
        write(out, name, "123456")

    collection = collect(out, [], Limits(file_bytes=100, total_bytes=15, files=100))

    assert paths(collection) == ["a.txt", "b.txt"] and sum(f.size for f in collection.files) == 12
    assert "cap of 15 bytes" in collection.over_cap


def test_more_files_than_the_file_count_cap_stop_collection(out):
    for name in ("a.txt", "b.txt", "c.txt"):
        write(out, name, "x")

    collection = collect(out, [], Limits(file_bytes=100, total_bytes=1000, files=2))

    assert paths(collection) == ["a.txt", "b.txt"]
    assert collection.over_cap == "more than 2 output files"


def test_exactly_the_file_count_cap_is_within_the_caps(out):
    for name in ("a.txt", "b.txt"):
        write(out, name, "x")

    collection = collect(out, [], Limits(file_bytes=100, total_bytes=1000, files=2))

    assert paths(collection) == ["a.txt", "b.txt"] and collection.over_cap == ""


# --- into the store --------------------------------------------------------------------------------


def test_store_copies_a_collected_file_into_the_jobs_output_folder(out):
    write(out, "reports/summary.json", '{"ok": true}')
    [collected] = collect(out, [], ROOMY).files

    store("job-1", collected)

    with default_storage.open(output_key("job-1", "reports/summary.json"), "rb") as stored:
        assert sha256(stored.read()) == collected.sha256


def test_store_keeps_every_kept_name_where_it_can_be_read_back(out):
    for rel in ODD_OUTPUT_NAMES:
        write(out, rel, f"content of {rel}")
    collection = collect(out, [], ROOMY)

    for collected in collection.files:
        store("job-1", collected)

    assert len(collection.files) == len(ODD_OUTPUT_NAMES)
    for rel in ODD_OUTPUT_NAMES:
        with default_storage.open(output_key("job-1", rel), "rb") as stored:
            assert stored.read() == f"content of {rel}".encode(), rel


def test_a_store_key_never_leaves_the_jobs_output_folder(out):
    for rel in ("..\\x", "..\\..\\..\\etc\\passwd", "a\\..\\..\\b"):
        assert output_key("job-1", rel).startswith("jobs/job-1/output/")
        assert ".." not in output_key("job-1", rel).replace("\\", "/").split("/")


def test_store_never_follows_a_symlink_swapped_in_after_collection(out):
    write(out, "model.json", "{}")
    [collected] = collect(out, [], ROOMY).files
    (out / "model.json").unlink()
    os.symlink("/etc/passwd", out / "model.json")

    with pytest.raises(OSError):
        store("job-1", collected)
    assert not default_storage.exists(output_key("job-1", "model.json"))
