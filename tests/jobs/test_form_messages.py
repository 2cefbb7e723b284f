"""The submit form's messages and helps, and its script box: an amount
no node has says "can never be held" whatever the bound; a number that is not one says so with its unit;
files chosen before an error are named to be chosen again; the worst case is on the page from the start
and reads a time limit with units; a script box runs its lines with sh or python3."""

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils.html import escape

from jobs.models import Job
from jobs.submit.forms import JobForm
from jobs.submit.scripts import script_argv, script_of
from pool.nodes import Capacity, register
from tests.factories import submit_job

JOBS = "/api/v1/jobs/"


def declared(**changes) -> dict:
    form = {"name": "n", "image": "busybox", "command": "true", "cpus": "1", "memory_mb": "64", "time_limit_s": "60"}
    form.update(changes)
    return {k: v for k, v in form.items() if v is not None}


@pytest.fixture
def me(client, member):
    client.force_login(member)
    return client


@pytest.fixture
def small_node(db):
    """A pool of one node of 2 cpus, 4096 MB and no gpu."""
    from django.utils import timezone

    return register("small", Capacity(cpu_ids=[0, 1], memory_mb=4096, gpu_ids=[]), now=timezone.now())


# --- an amount no node has -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "largest"),
    [("cpus", "999", 2), ("cpus", "4", 2), ("memory_mb", "999999999", 4096), ("gpus", "99", 0), ("gpus", "1", 0)],
)
def test_an_amount_over_the_largest_node_can_never_be_held_whatever_the_bound(
    member, image, small_node, field, value, largest
):
    form = JobForm(declared(**{field: value}), user=member)

    assert not form.is_valid()
    assert form.errors[field] == [f"Can never be held: the largest node has {largest}."]
    # Past the field's bound too, the field alone says it (a sentence would repeat a number of any length).
    within = int(value) <= JobForm.base_fields[field].max_value
    assert ("This request can never be held" in " ".join(form.non_field_errors())) == within


def test_the_api_says_the_same_of_999_cpus(api, image, small_node):
    response = api.post(JOBS, json.dumps(declared(cpus=999)), content_type="application/json")

    assert response.status_code == 400
    assert response.json() == {"cpus": ["Can never be held: the largest node has 2."]}


def test_without_a_node_an_amount_is_held_to_its_bound(member, image, db):
    form = JobForm(declared(cpus="999"), user=member)

    assert not form.is_valid() and form.errors["cpus"] == ["Ensure this value is less than or equal to 256."]


def test_an_amount_is_checked_against_the_pool_when_another_is_not_a_number(member, image, small_node):
    form = JobForm(declared(cpus="abc", memory_mb="999999"), user=member)

    assert not form.is_valid()
    assert form.errors["cpus"] == ["Enter a whole number of CPUs, such as 2."]
    assert form.errors["memory_mb"] == ["Can never be held: the largest node has 4096."]
    assert "__all__" not in form.errors  # the request is not whole: only its fields are said


def test_the_form_page_shows_can_never_be_held_under_the_cpus(me, image, small_node):
    page = me.post("/jobs/new/", declared(cpus="999")).content.decode()

    cpus = page[page.index('class="field field-cpus') :]
    cpus = cpus[: cpus.index('<div class="field ')]
    assert "Can never be held: the largest node has 2." in cpus and "less than or equal" not in page


# --- a number that is not one ------------------------------------------------------------------------

NOT_A_NUMBER = {
    "cpus": "Enter a whole number of CPUs, such as 2.",
    "memory_mb": "Enter a whole number of MB, such as 512.",
    "gpus": "Enter a whole number of GPUs, such as 1.",
    "max_retries": "Enter a whole number of retries, such as 2.",
    "time_limit_s": "Enter seconds, a duration with units such as 90s, 90m, 2h, 1h30m or 1d, or a time as Slurm "
    "writes it such as 30:00, 1:30:00 or 2-12:00:00.",
}


@pytest.mark.parametrize(("field", "message"), NOT_A_NUMBER.items())
def test_a_number_field_holding_text_says_it_is_not_a_number(member, image, small_node, field, message):
    form = JobForm(declared(**{field: "abc"}), user=member)

    assert not form.is_valid() and form.errors[field] == [message]


def test_memory_left_empty_is_still_required(member, image, small_node):
    form = JobForm(declared(memory_mb=""), user=member)

    assert not form.is_valid() and form.errors["memory_mb"] == ["This field is required."]


def test_the_number_boxes_are_text_so_a_browser_sends_what_was_typed(me, image):
    """A type=number box holding "abc" is sent empty: the form could only call it missing."""
    page = me.get("/jobs/new/").content.decode()

    for name in NOT_A_NUMBER:
        box = re.search(rf'<input [^>]*name="{name}"[^>]*>', page).group(0)
        assert 'type="text"' in box, box
    assert 'inputmode="numeric"' in re.search(r'<input [^>]*name="memory_mb"[^>]*>', page).group(0)


# --- files to choose again ---------------------------------------------------------------------------


def test_files_chosen_before_an_error_are_named_with_their_sizes_at_the_field_and_in_the_summary(me, image, small_node):
    files = [SimpleUploadedFile("job.py", b"x" * 1229), SimpleUploadedFile("data.csv", b"y" * 40 * 1024)]

    response = me.post("/jobs/new/", {**declared(memory_mb="abc"), "data": files})

    assert response.status_code == 400
    page = response.content.decode()
    again = (
        "Choose again: <strong>job.py</strong> (1.2\xa0KB), <strong>data.csv</strong> (40.0\xa0KB)"
        " — a browser cannot keep chosen files across an error."
    )
    summary = page[page.index('id="form-errors"') : page.index("</ul>")]
    assert again in summary and '<a href="#id_data">Data files</a>' in summary
    field = page[page.index('class="drop-zone"') :]
    assert again in field[: field.index("</fieldset>")]
    assert not Job.objects.exists()


def test_no_file_is_named_again_when_none_was_chosen(me, image, small_node):
    page = me.post("/jobs/new/", declared(memory_mb="abc")).content.decode()

    assert "Choose again" not in page


# --- the worst case ----------------------------------------------------------------------------------


def estimate_of(page: str) -> str:
    return re.search(r'<p class="note estimate" id="estimate".*?</p>', page, re.S).group(0)


def test_the_estimate_of_90m_is_the_estimate_of_5400(me, image):
    asked = {"cpus": "2", "memory_mb": "512", "gpus": "0", "image": image.name}

    in_minutes = me.get("/jobs/estimate/", {**asked, "time_limit_s": "90m"}).content.decode()
    in_seconds = me.get("/jobs/estimate/", {**asked, "time_limit_s": "5400"}).content.decode()

    assert "Worst case" in in_seconds and in_minutes == in_seconds
    assert "Worst case" in me.get("/jobs/estimate/", {**asked, "time_limit_s": "1h30m"}).content.decode()


def test_the_estimate_is_on_the_form_from_the_first_load_with_the_defaults(me, image):
    page = me.get("/jobs/new/").content.decode()
    defaults = me.get("/jobs/estimate/", {"cpus": "1", "memory_mb": "256", "gpus": "0", "time_limit_s": "600",
                                          "image": image.name}).content.decode()  # fmt: skip

    assert "Worst case" in estimate_of(page) and estimate_of(page) == estimate_of(defaults)


def test_the_estimate_is_on_the_resubmit_form_for_the_earlier_jobs_request(me, member, team, image, local_node):
    earlier = submit_job(member, team, image=image, cpus=1, memory_mb=128, time_limit_s=5400)
    page = me.get(f"/jobs/{earlier.pk}/resubmit/").content.decode()
    same = me.get("/jobs/estimate/", {"cpus": "1", "memory_mb": "128", "time_limit_s": "90m", "image": image.name})

    assert "Worst case" in estimate_of(page) and estimate_of(page) == estimate_of(same.content.decode())


def test_the_estimate_is_on_a_form_that_came_back_with_an_error_for_what_was_sent(me, image, small_node):
    page = me.post("/jobs/new/", declared(name="", cpus="2", memory_mb="512", time_limit_s="90m")).content.decode()
    same = me.get("/jobs/estimate/", {"cpus": "2", "memory_mb": "512", "time_limit_s": "5400", "image": image.name})

    assert "Worst case" in estimate_of(page) and estimate_of(page) == estimate_of(same.content.decode())


# --- the script box ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "argv"),
    [
        ("echo one\necho two", ["sh", "-c", "echo one\necho two"]),
        ("#!/bin/sh\nset -e\necho hi", ["sh", "-c", "#!/bin/sh\nset -e\necho hi"]),
        ("#!/usr/bin/env python3\nprint(1)", ["python3", "-c", "#!/usr/bin/env python3\nprint(1)"]),
        ("#!/usr/bin/python3\nprint(1)", ["python3", "-c", "#!/usr/bin/python3\nprint(1)"]),
        ("#! /usr/local/bin/python3.12 -u\nprint(1)", ["python3", "-c", "#! /usr/local/bin/python3.12 -u\nprint(1)"]),
        ("#!/usr/bin/env python\nprint(1)", ["python3", "-c", "#!/usr/bin/env python\nprint(1)"]),
        ("#!/usr/bin/env -S python3 -u\nprint(1)", ["python3", "-c", "#!/usr/bin/env -S python3 -u\nprint(1)"]),
        ("#!/usr/bin/pythonista\necho", ["sh", "-c", "#!/usr/bin/pythonista\necho"]),
        ("# python3 is used below\npython3 x.py", ["sh", "-c", "# python3 is used below\npython3 x.py"]),
    ],
)
def test_a_script_runs_with_sh_or_with_python3_under_a_python_shebang(script, argv):
    assert script_argv(script) == argv


def test_a_script_of_several_lines_is_found_again_in_its_argv():
    for script in ["echo one\necho two", "#!/usr/bin/env python3\nprint(1)"]:
        assert script_of(script_argv(script)) == script
    assert script_of(["sh", "-c", "echo one"]) is None  # one line: shown as the command it is
    assert script_of(["sh", "-c", "#!/usr/bin/python3\nprint(1)"]) is None  # not what the box makes of it
    assert script_of(["bash", "-c", "a\nb"]) is None


def test_the_script_box_declares_the_argv_with_its_lines_as_typed(member, image, small_node):
    typed = "\r\n  \r\n#!/usr/bin/env python3\r\nfor i in range(2):\r\n    print(i)\r\n\r\n"
    form = JobForm(declared(command="", script=typed), user=member)

    assert form.is_valid(), form.errors
    assert form.declaration().command == ["python3", "-c", "#!/usr/bin/env python3\nfor i in range(2):\n    print(i)"]


def test_a_command_and_a_script_together_are_refused_on_the_script(member, image, small_node):
    form = JobForm(declared(command="true", script="echo hi"), user=member)

    assert not form.is_valid()
    assert form.errors["script"] == ["Give a command or a script, not both: empty one of them."]


@pytest.mark.parametrize("script", [None, "", "  \r\n\n "])
def test_neither_a_command_nor_a_script_is_refused_on_the_command(member, image, small_node, script):
    form = JobForm(declared(command=None, script=script), user=member)

    assert not form.is_valid() and form.errors["command"] == ["Give a command, or a script in the script box."]


def test_an_empty_json_list_is_still_a_bad_command(api, image, small_node):
    response = api.post(JOBS, json.dumps(declared(command=[], script="echo hi")), content_type="application/json")

    assert response.status_code == 400 and response.json() == {
        "command": ["The command must be a non-empty list of strings."]
    }


def test_the_api_takes_a_script(api, image, small_node):
    response = api.post(
        JOBS, json.dumps(declared(command=None, script="set -e\necho hi")), content_type="application/json"
    )

    assert response.status_code == 201, response.content
    assert response.json()["command"] == ["sh", "-c", "set -e\necho hi"]


def test_a_script_job_comes_back_in_the_script_box_on_resubmit(me, member, team, image, small_node):
    me.post("/jobs/new/", declared(command="", script="echo one\necho two"))
    earlier = Job.objects.get()

    page = me.get(f"/jobs/{earlier.pk}/resubmit/").content.decode()

    assert re.search(r'<textarea [^>]*name="script"[^>]*>\necho one\necho two</textarea>', page)
    assert re.search(r'<input [^>]*name="command"[^>]*>', page).group(0).count("value=") == 0
    assert escape("Give a command") not in page
