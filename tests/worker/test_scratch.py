"""The scratch folder of a run: /output is a filesystem of its own whose size and inode count are the
output caps, so the kernel holds the job to them while it runs (the worker runs as root)."""

import errno
import os
import shutil
import stat

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.utils import timezone

from jobs.lifecycle.inputs import Staged
from pool.models import Node
from pool.nodes import Capacity, register
from worker import node
from worker.scratch import OUTPUT_FOLDERS, PAGE, Scratch, ScratchError, remove_leftovers, space

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only root may mount /output's filesystem")

UID = 10001


@pytest.fixture
def caps(settings):
    settings.E31_OUTPUT_TOTAL_MAX_BYTES = 1 << 20
    settings.E31_OUTPUT_MAX_FILES = 20


@pytest.fixture
def prepared(caps):
    scratch = Scratch("job-1", uid=UID)
    scratch.prepare([])
    yield scratch
    scratch.remove()


def mount_points() -> list[str]:
    return [line.split()[4] for line in open("/proc/self/mountinfo").read().splitlines()]


def fill(folder, *, files: int = 0, data: int = 0) -> OSError:
    """Write into `folder` as a job would, until the kernel says no; return what it said."""
    try:
        for n in range(files or 1_000_000):
            with open(folder / f"f{n}", "wb") as out:
                out.write(b"x" * data)
    except OSError as exc:
        return exc
    raise AssertionError("the kernel never refused")


def test_output_is_a_filesystem_of_its_own_sized_to_the_output_caps(prepared):
    fs = os.statvfs(prepared.output)

    assert str(prepared.output) in mount_points()
    assert os.stat(prepared.output).st_dev != os.stat(prepared.root).st_dev
    assert fs.f_files == 20 + OUTPUT_FOLDERS + 2  # its root, and one spare: within the caps is never full
    # A page per inode above the cap: tmpfs counts whole pages, and outputs within the caps must fit.
    assert fs.f_blocks * fs.f_frsize == (1 << 20) + fs.f_files * PAGE
    st = os.stat(prepared.output)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (UID, UID, 0o700)


def test_creating_past_the_file_cap_is_refused_by_the_kernel_and_named(prepared):
    refused = fill(prepared.output)

    assert refused.errno == errno.ENOSPC
    assert len(os.listdir(prepared.output)) == 20 + OUTPUT_FOLDERS + 1
    assert prepared.output_full() == (
        "/output filled up while the job ran (at most 20 output files, and 64 folders besides): "
        "creating more failed with 'No space left on device'"
    )


def test_writing_past_the_byte_cap_is_refused_by_the_kernel_and_named(prepared):
    refused = fill(prepared.output, files=1, data=4 << 20)

    assert refused.errno == errno.ENOSPC
    assert prepared.output_full() == (
        "/output filled up while the job ran (the output cap is 1048576 bytes): "
        "writing more failed with 'No space left on device'"
    )


def test_outputs_within_the_caps_always_fit_and_are_not_called_full(prepared):
    # The most whole pages outputs within the caps can take: every file a byte into a new page.
    per_file = (1 << 20) // 20
    for n in range(20):
        (prepared.output / f"f{n}").write_bytes(b"x" * per_file)
    for n in range(OUTPUT_FOLDERS):
        (prepared.output / f"d{n}").mkdir()

    assert prepared.output_full() == ""


def test_remove_unmounts_output_and_deletes_the_folder(prepared):
    (prepared.output / "model.json").write_text("{}")

    prepared.remove()

    assert str(prepared.output) not in mount_points() and not prepared.root.exists()


def test_prepare_clears_what_an_earlier_run_of_the_job_left_mounted(prepared):
    (prepared.output / "stale.txt").write_text("from the lost attempt")

    again = Scratch("job-1", uid=UID)
    again.prepare([])

    assert mount_points().count(str(again.output)) == 1
    assert os.listdir(again.output) == []


def test_leftovers_are_removed_unless_kept(caps):
    kept, crashed = Scratch("kept", uid=UID), Scratch("crashed", uid=UID)
    for scratch in (kept, crashed):
        scratch.prepare([])
    try:
        assert remove_leftovers(keep={"kept"}) == ["crashed"]

        assert str(crashed.output) not in mount_points() and not crashed.root.exists()
        assert str(kept.output) in mount_points()
    finally:
        kept.remove()
        crashed.remove()


def test_the_scratch_space_is_read_from_the_disk_of_the_nearest_folder_that_exists(settings, tmp_path):
    settings.E31_SCRATCH_DIR = tmp_path / "not" / "made" / "yet"
    settings.E31_SCRATCH_MIN_FREE_MB = 4321

    reported = space()

    assert abs(reported.free_mb - shutil.disk_usage(tmp_path).free // (1024 * 1024)) <= 16
    assert reported.min_free_mb == 4321


def test_each_heartbeat_tells_the_pool_the_nodes_scratch_space_and_floor(settings, db):
    settings.E31_SCRATCH_MIN_FREE_MB = 10**9  # more than any disk here has
    register(settings.E31_NODE_NAME, Capacity(cpu_ids=[0], memory_mb=1024, gpu_ids=[]), now=timezone.now())

    node.send_heartbeat()

    found = Node.objects.get(name=settings.E31_NODE_NAME)
    assert found.scratch_free_mb and found.scratch_min_free_mb == 10**9 and found.short_of_scratch


# --- staged data ------------------------------------------------------------------------------------


def stored(key: str, content: bytes) -> Staged:
    default_storage.save(key, ContentFile(content))
    return Staged(key.rsplit("/output/", 1)[-1].rsplit("/data/", 1)[-1], key, len(content))


@pytest.fixture
def inputs(caps):
    """A data file of the job's own and two outputs of an earlier job, one in sub-folders."""
    return [
        stored("jobs/j/data/run.sh", b"echo hi"),
        Staged("from/up/a/b/weights.bin", stored("jobs/up/output/a/b/weights.bin", b"w" * 5000).key, 5000),
        Staged("from/up/train.csv", stored("jobs/up/output/train.csv", b"1,2").key, 3),
    ]


def test_inputs_are_staged_in_their_sub_folders_read_only_and_owned_like_data(inputs):
    scratch = Scratch("job-1", uid=UID)
    scratch.prepare(inputs)
    try:
        assert (scratch.data / "from/up/a/b/weights.bin").read_bytes() == b"w" * 5000
        assert (scratch.data / "from/up/train.csv").read_bytes() == b"1,2"
        assert (scratch.data / "run.sh").read_bytes() == b"echo hi"
        for name, mode in [
            ("", 0o500), ("from", 0o500), ("from/up", 0o500), ("from/up/a", 0o500), ("from/up/a/b", 0o500),
            ("from/up/a/b/weights.bin", 0o400), ("from/up/train.csv", 0o400), ("run.sh", 0o400),
        ]:  # fmt: skip
            st = os.stat(scratch.data / name)
            assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (UID, UID, mode), name
        with pytest.raises(OSError) as refused:
            (scratch.data / "from/up/a/new").write_text("x")  # even root may not: the filesystem is read-only
        assert refused.value.errno == errno.EROFS
    finally:
        scratch.remove()


def test_the_data_filesystem_has_an_inode_for_each_file_and_folder_and_no_more(inputs):
    scratch = Scratch("job-1", uid=UID)
    scratch.prepare(inputs)
    try:
        fs = os.statvfs(scratch.data)
        # 3 files, 4 folders (from, from/up, from/up/a, from/up/a/b), the root and a spare.
        assert fs.f_files == 3 + 4 + 2
        assert fs.f_ffree == 1
        assert fs.f_blocks * fs.f_frsize == (1 + 2 + 1) * PAGE + 9 * PAGE
    finally:
        scratch.remove()


def test_an_input_gone_from_the_store_fails_staging_naming_it(inputs):
    default_storage.delete(inputs[2].key)
    scratch = Scratch("job-1", uid=UID)
    try:
        with pytest.raises(ScratchError, match=r"^/data/from/up/train.csv could not be staged: No such file"):
            scratch.prepare(inputs)
    finally:
        scratch.remove()


def test_an_input_deleted_by_retention_fails_staging_saying_so(inputs):
    gone = Staged("from/up/train.csv", inputs[2].key, 3, gone="the outputs of job up were deleted (retention)")
    scratch = Scratch("job-1", uid=UID)
    try:
        with pytest.raises(ScratchError) as failed:
            scratch.prepare([*inputs[:2], gone])
        assert str(failed.value) == (
            "/data/from/up/train.csv could not be staged: the outputs of job up were deleted (retention)"
        )
    finally:
        scratch.remove()


@pytest.mark.parametrize("name", ["../escape", "from/../../x", "/abs", "from//x", "from/./x"])
def test_a_name_that_would_leave_data_is_refused(caps, name):
    scratch = Scratch("job-1", uid=UID)
    try:
        with pytest.raises(ScratchError, match="not a path inside /data"):
            scratch.prepare([Staged(name, "jobs/j/data/x", 1)])
    finally:
        scratch.remove()


def test_a_preempted_attempts_outputs_are_put_back_under_output_as_the_job_s(prepared):
    default_storage.save("kept/checkpoint.txt", ContentFile(b"step 7"))
    default_storage.save("kept/deep/state.bin", ContentFile(b"\x00\x01"))

    prepared.restore_outputs([
        Staged("checkpoint.txt", "kept/checkpoint.txt", 6), Staged("deep/state.bin", "kept/deep/state.bin", 2)
    ])  # fmt: skip

    assert (prepared.output / "checkpoint.txt").read_bytes() == b"step 7"
    assert (prepared.output / "deep" / "state.bin").read_bytes() == b"\x00\x01"
    assert {os.stat(p).st_uid for p in (prepared.output / "deep", prepared.output / "deep" / "state.bin")} == {UID}


def test_an_output_path_leading_out_of_output_is_not_restored(prepared):
    default_storage.save("kept/x", ContentFile(b"x"))
    with pytest.raises(ScratchError, match="not under /output"):
        prepared.restore_outputs([Staged("../data/x", "kept/x", 1)])
