"""The files a run stages: its own data files, and the outputs of the jobs it reads (`inputs_from`) at
/data/from/<job id>/<path>, chosen by the glob as output patterns choose outputs."""

import pytest
from django.utils import timezone

from jobs.lifecycle.inputs import Staged, matches, staged_files
from jobs.models import Input, JobArray, Outcome
from jobs.storage.logs import read_log
from jobs.storage.store import data_key, output_key
from tests.conftest import run_here
from tests.factories import store_output, submit_job
from worker import outputs

pytestmark = pytest.mark.django_db


@pytest.fixture
def upstream(member, team):
    job = submit_job(member, team, name="prepare")
    for path in ("train.csv", "test.csv", "models/a/weights.bin", "models/b.json", "notes.txt"):
        store_output(job, path, path.encode())
    return job


def staged(job) -> list[tuple[str, str, int]]:
    return [(s.name, s.key, s.size) for s in staged_files(job)]


def test_a_job_without_inputs_stages_its_own_data_files(member, team):
    job = submit_job(member, team, files={"b.txt": "bb", "a.txt": "a"})

    assert staged(job) == [("a.txt", data_key(job.pk, "a.txt"), 1), ("b.txt", data_key(job.pk, "b.txt"), 2)]


def test_inputs_matching_the_glob_follow_the_jobs_own_files_under_from_and_the_jobs_id(member, team, upstream):
    job = submit_job(member, team, files={"run.sh": "echo"})
    Input.objects.create(job=job, from_job=upstream, glob="*.csv")

    assert staged(job) == [
        ("run.sh", data_key(job.pk, "run.sh"), 4),
        (f"from/{upstream.pk}/test.csv", output_key(upstream.pk, "test.csv"), 8),
        (f"from/{upstream.pk}/train.csv", output_key(upstream.pk, "train.csv"), 9),
    ]


@pytest.mark.parametrize("glob", ["*", "**", ""])
def test_a_glob_of_star_takes_every_output_sub_folders_too(member, team, upstream, glob):
    job = submit_job(member, team)
    Input.objects.create(job=job, from_job=upstream, glob=glob)

    assert [s.name for s in staged_files(job)] == [
        f"from/{upstream.pk}/{path}"
        for path in ("models/a/weights.bin", "models/b.json", "notes.txt", "test.csv", "train.csv")
    ]


@pytest.mark.parametrize(
    ("glob", "taken"),
    [
        ("models/", ["models/a/weights.bin", "models/b.json"]),  # a folder takes what is under it
        ("models", ["models/a/weights.bin", "models/b.json"]),
        ("models/*.json", ["models/b.json"]),
        ("*.bin", ["models/a/weights.bin"]),  # `*` crosses folders, as in output patterns
        ("t?st.csv", ["test.csv"]),
        ("[tn]*.txt", ["notes.txt"]),
        ("Notes.txt", []),  # case counts
        ("nothing", []),
    ],
)
def test_the_glob_chooses_outputs_as_output_patterns_do(member, team, upstream, glob, taken):
    job = submit_job(member, team)
    Input.objects.create(job=job, from_job=upstream, glob=glob)

    assert [s.name for s in staged_files(job)] == [f"from/{upstream.pk}/{path}" for path in taken]
    assert outputs.matches is matches  # output collection and inputs share one rule


def test_globs_of_one_job_that_overlap_stage_each_output_once(member, team, upstream):
    job = submit_job(member, team)
    Input.objects.create(job=job, from_job=upstream, glob="*.csv")
    Input.objects.create(job=job, from_job=upstream, glob="train*")

    assert [s.name for s in staged_files(job)] == [f"from/{upstream.pk}/test.csv", f"from/{upstream.pk}/train.csv"]


def test_inputs_of_two_jobs_are_kept_apart_by_their_ids(member, team, upstream):
    other = submit_job(member, team, name="other")
    store_output(other, "train.csv", b"other")
    job = submit_job(member, team)
    Input.objects.create(job=job, from_job=upstream, glob="train.csv")
    Input.objects.create(job=job, from_job=other, glob="train.csv")

    assert sorted(staged(job)) == sorted(
        [
            (f"from/{upstream.pk}/train.csv", output_key(upstream.pk, "train.csv"), 9),
            (f"from/{other.pk}/train.csv", output_key(other.pk, "train.csv"), 5),
        ]
    )


def test_every_task_of_an_array_stages_the_arrays_inputs_and_no_other_job_does(member, team, upstream):
    array = JobArray.objects.create(team=team, submitted_by=member, name="sweep", size=2, submitted_at=timezone.now())
    tasks = [submit_job(member, team, name=f"task {n}") for n in range(2)]
    for index, task in enumerate(tasks):
        task.array, task.array_index = array, index
        task.save(update_fields=["array", "array_index"])
    Input.objects.create(array=array, from_job=upstream, glob="models/")
    Input.objects.create(job=tasks[1], from_job=upstream, glob="notes.txt")
    bystander = submit_job(member, team)

    assert [s.name for s in staged_files(tasks[0])] == [
        f"from/{upstream.pk}/models/a/weights.bin",
        f"from/{upstream.pk}/models/b.json",
    ]
    assert [s.name for s in staged_files(tasks[1])] == [
        f"from/{upstream.pk}/models/a/weights.bin",
        f"from/{upstream.pk}/models/b.json",
        f"from/{upstream.pk}/notes.txt",
    ]
    assert staged_files(bystander) == []


def test_the_files_are_found_in_three_queries_however_many(member, team, upstream, django_assert_num_queries):
    job = submit_job(member, team, files={"a.txt": "a", "b.txt": "b"})
    others = [submit_job(member, team, name=f"other {n}") for n in range(3)]
    for other in others:
        store_output(other, "x/y.txt", b"y")
        Input.objects.create(job=job, from_job=other, glob="*")
    Input.objects.create(job=job, from_job=upstream, glob="*")

    with django_assert_num_queries(3):  # its data files, its inputs, and the outputs they name
        found = staged_files(job)

    assert len(found) == 2 + 3 + 5


def test_an_input_whose_outputs_were_deleted_by_retention_says_so(member, team, upstream):
    when = timezone.now()
    upstream.files_deleted_at = when
    upstream.save(update_fields=["files_deleted_at"])
    job = submit_job(member, team)
    Input.objects.create(job=job, from_job=upstream, glob="train.csv")

    assert staged_files(job) == [
        Staged(
            f"from/{upstream.pk}/train.csv",
            output_key(upstream.pk, "train.csv"),
            9,
            upstream.output_files.get(path="train.csv").sha256,
            gone=f"the outputs of job {upstream.pk} were deleted on {when:%Y-%m-%d} (retention)",
        )
    ]


# --- real containers -------------------------------------------------------------------------------


def report(job) -> dict[str, str]:
    """The `key=value` lines a job printed."""
    lines = (line.partition("=") for line in read_log(job.pk)[0].decode(errors="replace").splitlines())
    return {key.strip(): value.strip() for key, _, value in lines if value}


READ_INPUTS = (
    'cd /data/from/"$UPSTREAM" && echo "files=$(find . -type f | sort | tr "\\n" " ")"; '
    'echo "weights=$(cat models/a/weights.bin)"; echo "csv=$(cat train.csv)"; '
    "touch models/new 2>/dev/null && echo write=ok || echo write=refused; "
    "rm train.csv 2>/dev/null && echo remove=ok || echo remove=refused; "
    'echo "modes=$(stat -c %a /data/from /data/from/$UPSTREAM models models/a models/a/weights.bin | tr "\\n" " ")"'
)


@pytest.mark.docker
def test_a_job_reads_the_outputs_of_the_job_it_reads_from_under_data_from(member, team, local_node, images):
    writer = run_here(
        submit_job(
            member,
            team,
            command="mkdir -p /output/models/a && echo w8 > /output/models/a/weights.bin && "
            "echo 1,2 > /output/train.csv && echo skip > /output/log.txt",
        )
    )
    assert writer.outcome == Outcome.SUCCEEDED, writer.reason
    reader = submit_job(member, team, command=READ_INPUTS, env={"UPSTREAM": str(writer.pk)}, files={"own.txt": "x"})
    Input.objects.create(job=reader, from_job=writer, glob="models/")
    Input.objects.create(job=reader, from_job=writer, glob="*.csv")

    reader = run_here(reader)

    assert reader.outcome == Outcome.SUCCEEDED, reader.reason
    seen = report(reader)
    assert seen["files"] == "./models/a/weights.bin ./train.csv", seen
    assert (seen["weights"], seen["csv"]) == ("w8", "1,2"), seen
    assert (seen["write"], seen["remove"]) == ("refused", "refused"), seen
    assert seen["modes"] == "500 500 500 500 400", seen


@pytest.mark.docker
def test_a_job_whose_input_was_deleted_by_retention_fails_naming_the_file(member, team, local_node, images):
    writer = run_here(submit_job(member, team, command="echo 1,2 > /output/train.csv"))
    writer.files_deleted_at = timezone.now()
    writer.save(update_fields=["files_deleted_at"])
    reader = submit_job(member, team)
    Input.objects.create(job=reader, from_job=writer, glob="*")

    reader = run_here(reader)

    assert reader.outcome == Outcome.FAILED
    assert reader.reason == (
        f"the node could not run the job: /data/from/{writer.pk}/train.csv could not be staged: "
        f"the outputs of job {writer.pk} were deleted on {writer.files_deleted_at:%Y-%m-%d} (retention)"
    )
