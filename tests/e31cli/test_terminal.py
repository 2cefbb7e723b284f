"""What `e31` prints of other people's data (job names, reasons, paths, logs) is shown to the terminal, never
obeyed by it: Rich markup is not read, control characters are shown as escapes, and `logs --raw` alone
writes a log's bytes as they are. The server here is a stand-in answering what a hostile job could make
it say, whatever the server's own checks of names (jobs.submit.forms) let through today."""

import io
import json

import pytest

from e31cli import session
from e31cli.exits import Exit
from e31cli.terminal import LogText, json_visible, visible
from jobs.storage import logs
from tests.e31cli.conftest import e31_process
from tests.factories import submit_job

JOB_ID = "5b0e6f3c-8d1a-4c55-9a8e-0d6f4c1e2a77"
HOSTILE_NAMES = [
    "[/x]",
    "[link=http://evil.example]click me[/link]",
    "[bold red]not bold[/]",
    ":bomb: stays words",
]
CONTROL_NAME = "title\x1b]0;pwned\x07 clear\x1b[2J cr\roverwrite lf\nline \u202ereversed"
CONTROL_SHOWN = "title\\x1b]0;pwned\\x07 clear\\x1b[2J cr\\roverwrite lf\\nline \\u202ereversed"
RAW_CONTROLS = ["\x1b", "\r", "\x07", "\u202e"]


def a_job(name: str, **fields) -> dict:
    return {
        "id": JOB_ID, "name": name, "team": "red", "image": "busybox", "command": ["sh", "-c", name],
        "request": {"cpus": 1, "memory_mb": 64, "gpus": 0, "time_limit_s": 60}, "stage": "release",
        "outcome": "failed", "exit_code": 1, "reason": name, "submitted_at": "2026-12-04T10:00:00Z",
        "held_at": None, "started_at": None, "finished_at": None, "released_at": None, "hold": None,
        "record": None, "queue": "batch", "standing": None, **fields,
    }  # fmt: skip


def a_token(name: str) -> dict:
    return {"id": 1, "name": name, "prefix": "abcd", "user": "alice", "created_at": "2026-12-04T10:00:00Z"}


def a_node(name: str) -> dict:
    free = {"cpus": 2, "memory_mb": 512}
    return {"name": name, "state": "up", "cpus": 2, "memory_mb": 512, "gpus": 0, "free": free, "last_heartbeat": None}


def page(*rows: dict) -> dict:
    return {"count": len(rows), "next": None, "previous": None, "results": list(rows)}


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_list_shows_a_name_with_markup_as_it_is_and_exits_0(e31, name):
    result = e31({"/api/v1/jobs/": page(a_job(name))}, "list")

    assert result.exit_code == 0, result.output
    assert name in result.stdout
    assert "\x1b" not in result.stdout  # no hyperlink (OSC 8), no colour


def test_list_shows_control_characters_in_a_name_as_escapes(e31):
    result = e31({"/api/v1/jobs/": page(a_job(CONTROL_NAME))}, "list")

    assert result.exit_code == 0, result.output
    assert CONTROL_SHOWN in result.stdout
    assert not any(char in result.stdout for char in RAW_CONTROLS)
    assert len(result.stdout.splitlines()) == 2  # the header and one row: the LF did not make a line


@pytest.mark.parametrize(
    ("args", "routes"),
    [
        (["show", JOB_ID], {f"/api/v1/jobs/{JOB_ID}/": a_job(CONTROL_NAME + "[/x]")}),
        (
            ["outputs", JOB_ID],
            {f"/api/v1/jobs/{JOB_ID}/outputs/": (200, [{"path": CONTROL_NAME + "[/x]", "size": 1, "sha256": "ab"}])},
        ),
        (["tokens", "list"], {"/api/v1/tokens/": page(a_token(CONTROL_NAME + "[/x]"))}),
        (["nodes"], {"/api/v1/pool/nodes/": (200, [a_node(CONTROL_NAME + "[/x]")])}),
    ],
    ids=["show", "outputs", "tokens list", "nodes"],
)
def test_every_table_shows_data_as_it_is(e31, args, routes):
    result = e31(routes, *args)

    assert result.exit_code == 0, result.output
    assert CONTROL_SHOWN + "[/x]" in result.stdout
    assert not any(char in result.stdout for char in RAW_CONTROLS)


def test_a_reason_with_markup_and_escapes_ends_wait_as_a_plain_line(e31):
    routes = {f"/api/v1/jobs/{JOB_ID}/": a_job("n", reason="[/x] \x1b[2J\u202e"), f"/api/v1/jobs/{JOB_ID}/logs/": []}
    result = e31(routes, "wait", JOB_ID)

    assert result.exit_code == Exit.FAILED, result.output
    assert f"job {JOB_ID}: failed (exit 1): [/x] \\x1b[2J\\u202e" in result.stderr


def test_the_live_status_line_on_a_terminal_shows_a_node_name_with_markup_as_it_is(e31, monkeypatch):
    screen = io.StringIO()  # stderr as a terminal: the live status line is drawn there
    monkeypatch.setattr(session.err, "_file", screen)  # restored to None (sys.stderr as read at each print)
    monkeypatch.setattr(session.err, "_force_terminal", True)
    monkeypatch.setattr(session.err, "is_interactive", True)
    job = a_job("n", hold={"node": "[/x] \x1b[2J", "cpu_set": "0", "memory_mb": 64, "gpus": 0, "runtime": "runc"})
    result = e31({f"/api/v1/jobs/{JOB_ID}/": job}, "wait", JOB_ID)

    assert result.exit_code == Exit.FAILED, result.output  # the spinner read no markup (70 when it did)
    assert "on [/x] \\x1b[2J" in screen.getvalue()


def test_an_error_naming_hostile_data_is_one_plain_line(e31):
    refused = (400, {"name": ["[/x] is taken\x1b]0;pwned\x07"]})
    result = e31({"/api/v1/jobs/": refused}, "submit", "--image", "busybox", "--", "true")

    assert result.exit_code == Exit.REFUSED
    assert result.stderr == "e31: refused (400): name: [/x] is taken\\x1b]0;pwned\\x07\n"


# --- logs ------------------------------------------------------------------------------------------------

ANSI_LOG = [b"ok\n\x1b]0;pwned\x07\x1b[2Jcleared\r\n", b"over\rwritten\tcol \xe2\x80\xae \xff\n"]


def test_logs_show_terminal_escapes_as_text(e31):
    result = e31({f"/api/v1/jobs/{JOB_ID}/logs/": ANSI_LOG}, "logs", JOB_ID)

    assert result.exit_code == 0, result.output
    assert result.stdout == "ok\n\\x1b]0;pwned\\x07\\x1b[2Jcleared\\r\nover\\rwritten\tcol \\u202e \\xff\n"


def test_logs_raw_writes_the_bytes_as_they_are(e31):
    result = e31({f"/api/v1/jobs/{JOB_ID}/logs/": ANSI_LOG}, "logs", "--raw", JOB_ID)

    assert result.exit_code == 0, result.output
    assert result.stdout_bytes == b"".join(ANSI_LOG)


def test_a_character_split_between_two_chunks_of_a_log_is_whole(e31):
    result = e31({f"/api/v1/jobs/{JOB_ID}/logs/": [b"caf\xc3", b"\xa9 \xe2\x80", b"\xae\n"]}, "logs", JOB_ID)

    assert result.stdout == "café \\u202e\n"


def test_wait_streams_its_log_as_text_too(e31):
    routes = {f"/api/v1/jobs/{JOB_ID}/": a_job("n"), f"/api/v1/jobs/{JOB_ID}/logs/": [b"\x1b[2Jdone\n"]}
    result = e31(routes, "wait", "--logs", JOB_ID)

    assert result.stdout == "\\x1b[2Jdone\n"


def test_wait_json_logs_writes_the_log_to_stderr_and_the_job_alone_to_stdout(e31):
    routes = {f"/api/v1/jobs/{JOB_ID}/": a_job("n"), f"/api/v1/jobs/{JOB_ID}/logs/": [b"done\n"]}
    result = e31(routes, "wait", "--json", "--logs", JOB_ID)

    assert json.loads(result.stdout)["id"] == JOB_ID
    assert "\ndone\n" in result.stderr


# --- through the real server --------------------------------------------------------------------------------


def test_a_teammates_job_named_with_markup_lists_as_it_is_from_the_real_server(real_server, teammate, team):
    url, token = real_server
    for name in ["[/x]", "[link=http://x]click[/link]"]:
        submit_job(teammate, team, name=name)

    result = e31_process("list", url=url, token=token, text=False)

    assert result.returncode == 0, result.stderr
    assert b"[/x]" in result.stdout and b"[link=http://x]click[/link]" in result.stdout
    assert b"\x1b" not in result.stdout


def test_a_log_with_terminal_escapes_from_the_real_server_is_shown_unless_raw(real_server, member, team):
    url, token = real_server
    job = submit_job(member, team)
    logs.append(job.pk, 0, b"\x1b]0;pwned\x07\x1b[2Jdone\r\n")

    shown = e31_process("logs", str(job.pk), url=url, token=token, text=False)
    raw = e31_process("logs", "--raw", str(job.pk), url=url, token=token, text=False)

    assert shown.returncode == 0 and shown.stdout == b"\\x1b]0;pwned\\x07\\x1b[2Jdone\\r\n"
    assert raw.returncode == 0 and raw.stdout == b"\x1b]0;pwned\x07\x1b[2Jdone\r\n"


# --- the escaping itself ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain [text] :smile:", "plain [text] :smile:"),
        ("ünïcødé 日本語 emoji 😀", "ünïcødé 日本語 emoji 😀"),
        ("\x00\x1b\x7f\x9b", "\\x00\\x1b\\x7f\\x9b"),  # C0, DEL and C1 (0x9b is CSI on some terminals)
        ("tab\tcr\rlf\n", "tab\\tcr\\rlf\\n"),
        (
            "zero\u200bwidth \u2066isolate\u2069 \u2028sep \ufeffbom",
            "zero\\u200bwidth \\u2066isolate\\u2069 \\u2028sep \\ufeffbom",
        ),
        ("tag \U000e0041", "tag \\U000e0041"),
    ],
)
def test_control_and_format_characters_are_shown_as_escapes(text, shown):
    assert visible(text) == shown


def test_characters_kept_are_left_alone():
    assert visible("a\tb\nc\rd", keep="\n\t") == "a\tb\nc\\rd"


def test_log_text_ends_an_unfinished_character_visibly():
    log = LogText()

    assert log.feed(b"ok \xe2\x80") == b"ok "
    assert log.end() == b"\\xe2\\x80"


def test_json_output_is_the_servers_data_unchanged_and_safe_on_a_terminal(e31):
    result = e31({"/api/v1/jobs/": page(a_job(CONTROL_NAME))}, "list", "--json")

    assert json.loads(result.stdout)[0]["name"] == CONTROL_NAME
    assert not any(char in result.stdout for char in RAW_CONTROLS)  # each written as a JSON escape


def test_json_escapes_characters_beyond_the_basic_plane_as_a_surrogate_pair():
    assert json.loads(json_visible(json.dumps("\U000e0041 \x7f é", ensure_ascii=False))) == "\U000e0041 \x7f é"
    assert json_visible('"\U000e0041"') == '"\\udb40\\udc41"'


# --- the failure excerpt --------------------------------------------------------------------------


def test_wait_ends_a_failure_with_its_excerpt_after_the_outcome_line(e31):
    job = a_job("n", reason="exit code 3", exit_code=3, failure_excerpt="ok?\nERROR: upstream table missing")
    result = e31({f"/api/v1/jobs/{JOB_ID}/": job}, "wait", JOB_ID)

    assert result.exit_code == Exit.FAILED, result.output
    ending = result.stderr[result.stderr.index(f"job {JOB_ID}: failed") :].splitlines()
    assert ending == [
        f"job {JOB_ID}: failed (exit 3): exit code 3", "last lines of its log:", "  ok?",
        "  ERROR: upstream table missing",
    ]  # fmt: skip
    assert result.stdout == ""  # stdout is the log's and the id's


def test_a_success_ends_wait_without_an_excerpt(e31):
    job = a_job("n", outcome="succeeded", exit_code=0, reason="", failure_excerpt="a warning")
    result = e31({f"/api/v1/jobs/{JOB_ID}/": job}, "wait", JOB_ID)

    assert result.exit_code == 0 and "last lines" not in result.stderr and "a warning" not in result.output


def test_show_puts_the_excerpt_after_the_reason_escapes_shown(e31):
    job = a_job("n", reason="exit code 3", failure_excerpt="Traceback\n\x1b[2J[/x] KeyError")
    result = e31({f"/api/v1/jobs/{JOB_ID}/": job}, "show", JOB_ID)

    assert result.exit_code == 0, result.output
    lines = [line.strip() for line in result.stdout.splitlines()]
    at = next(i for i, line in enumerate(lines) if line.startswith("reason"))
    assert lines[at + 1].split() == ["last", "lines", "Traceback"]
    assert lines[at + 2] == "\\x1b[2J[/x] KeyError"
    assert lines[at + 3].startswith("submitted")
