"""Nothing internal on a page: every page of the site, and every fragment htmx asks for, rendered for a member and
for an operator over data that has a bit of everything (each outcome, a failed array, a pipeline broken in the
middle, a one-line script), says nothing a person should not have to read: no template syntax, no Python repr,
no raw id in a sentence. The routes come from the URLconf, so a new page is visited here or skipped with a reason;
the admin's pages come from its registry, so a model registered later is read too."""

import re
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from html.parser import HTMLParser

import pytest
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.contrib.auth.models import Group, Permission
from django.test import RequestFactory
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from accounting.budgets import extend
from accounting.meter import Usage
from accounting.models import Budget, RateCard, StoreQuota
from accounting.verification import verify_and_keep
from isolation.checks import judge_round, start_round
from jobs.lifecycle.actions import schedule_pass
from jobs.models import Job, JobArray, Outcome
from jobs.storage import logs
from jobtemplates.models import JobTemplate
from pool.models import MaintenanceWindow, Node, Queue
from pool.nodes import Capacity, register, set_state
from schedules.models import Schedule
from teams.people import token_for
from tests.factories import (
    JobArrayFactory,
    RuntimeImageFactory,
    array_tasks,
    ended_job,
    run_to_release,
    schedule_of,
    store_output,
    submit_job,
    webhook_of,
)
from tests.webhooks.http_receiver import ALLOWED
from webhooks.delivery import enqueue

HTMX = {"HTTP_HX_REQUEST": "true"}

# Routes that are not pages of the site, each with why it is not read here.
SKIPPED_PREFIXES = {
    "admin:": "the admin's pages, read from its registry (test_no_admin_page_shows_...)",
}
SKIPPED_PATHS = {
    "api/": "the API answers JSON, not a page (tests/e31site/test_schemathesis.py)",
}
SKIPPED = {
    "favicon": "a redirect to an image",
    "logout": "POST only",
    "revoke-token": "POST only",
    "schedules:pause": "POST only",
    "schedules:run": "POST only",
    "schedules:resume": "POST only",
    "notify:unsubscribe": "a signed link from an e-mail: tests/notify",
    "webhooks:delete": "POST only",
    "webhooks:redeliver": "POST only",
    "ops:node_action": "a confirmation for each action: the drain's is read (ops:node_action drain), the rest POST",
    "ops:usage_csv": "CSV, not a page",
    "jobtemplates:attach": "POST only",
    "jobtemplates:remove_file": "POST only",
    "jobtemplates:delete": "POST only",
    "jobtemplates:save": "POST only",
    "dashboard:metrics": "Prometheus text for a scraper",
    "jobs:cancel": "POST only",
    "jobs:pin": "POST only",
    "jobs:log": "the log as text/plain: what the job wrote",
    "jobs:output": "an output's bytes: what the job wrote",
    "jobs:outputs_zip": "a zip of the outputs",
    "jobs:image": "an output image's bytes",
    "jobs:array_cancel": "POST only",
    "jobs:array_resubmit": "POST only",
}

# Text a person should never read on a page.
INTERNAL = [
    re.compile(r"\{#|#\}|\{\{|\}\}|\{%|%\}"),
    re.compile(r"object at 0x|<QuerySet|QuerySet\[|NodeRow\(|Decimal\(|datetime\.|timedelta\(|UUID\('|\w object \("),
    re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I),
    re.compile(r"\{'[^']*': |\['[^']*'[,\]]"),  # a dict's or a list's repr (JSON, double-quoted, is data)
]


class VisibleText(HTMLParser):
    """A page's text as a reader sees it: without its tags, scripts and styles. An id inside <code> is shown to be
    copied (a job's id for the CLI, a delivery's to find in a receiver's log): only the template checks read it."""

    HIDDEN = {"script", "style", "template"}
    CODE = {"code", "kbd", "samp"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.prose: list[str] = []
        self.code: list[str] = []
        self._hidden = 0
        self._code = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self._hidden += tag in self.HIDDEN
        self._code += tag in self.CODE

    def handle_endtag(self, tag: str) -> None:
        if tag in self.HIDDEN:
            self._hidden = max(0, self._hidden - 1)
        if tag in self.CODE:
            self._code = max(0, self._code - 1)

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            (self.code if self._code else self.prose).append(data)


def internal_text(html: str, parser: VisibleText | None = None) -> list[str]:
    """What on the page's visible text should not be there: each match with a little of its sentence."""
    parser = parser or VisibleText()
    parser.feed(html)
    prose, code = " ".join(parser.prose), " ".join(parser.code)
    found = [prose[max(0, m.start() - 40) : m.end() + 40] for pattern in INTERNAL for m in pattern.finditer(prose)]
    found += [code[max(0, m.start() - 40) : m.end() + 40] for m in INTERNAL[0].finditer(code)]
    found += [code[max(0, m.start() - 40) : m.end() + 40] for m in INTERNAL[1].finditer(code)]
    return [" ".join(text.split()) for text in found]


def routes() -> dict[str, str]:
    """Every named route of the URLconf: its name (namespaced) → its pattern."""
    found: dict[str, str] = {}

    def walk(patterns: list, prefix: str, namespace: str) -> None:
        for p in patterns:
            if isinstance(p, URLResolver):
                inner = f"{namespace}{p.namespace}:" if p.namespace else namespace
                walk(p.url_patterns, prefix + str(p.pattern), inner)
            elif isinstance(p, URLPattern) and p.name:
                found[namespace + p.name] = prefix + str(p.pattern)

    walk(get_resolver().url_patterns, "", "")
    return found


@dataclass
class Site:
    """The data every page is read over, and the URLs to read, by route name."""

    visits: dict[str, list[tuple[str, dict]]] = field(default_factory=dict)

    def add(self, name: str, *args: object, query: str = "", htmx: bool = False) -> None:
        url = reverse(name, args=args) + (f"?{query}" if query else "")
        self.visits.setdefault(name, []).append((url, HTMX if htmx else {}))


@pytest.fixture
def site(member, teammate, team, operator, settings) -> Site:
    settings.E31_WEBHOOK_ALLOWED_HOSTS = [ALLOWED]
    now = timezone.now()
    node = register("n1", Capacity(cpu_ids=list(range(8)), memory_mb=32768, gpu_ids=[]), now=now - timedelta(days=2))
    RuntimeImageFactory()
    RuntimeImageFactory(name="python", reference="e31/python:3")
    usage = Usage(cpu_seconds=300.0, memory_peak_mb=48)
    jobs = [
        ended_job(member, team, outcome=Outcome.SUCCEEDED, at=now - timedelta(hours=5), name="render frames",
                  usage=usage, log=b"frame 1\nframe 2\n", outputs=["*.txt"]),
        ended_job(member, team, outcome=Outcome.FAILED, at=now - timedelta(hours=4), name="train model", exit_code=2,
                  reason="exited with code 2", log=b"Traceback (most recent call last):\nValueError: bad input\n"),
        ended_job(member, team, outcome=Outcome.OUT_OF_MEMORY, at=now - timedelta(hours=3), name="big join",
                  reason="went past its 64 MB"),
        ended_job(teammate, team, outcome=Outcome.TIMED_OUT, at=now - timedelta(hours=2), name="slow sweep",
                  reason="went past its time limit"),
        ended_job(member, team, outcome=Outcome.CANCELLED, at=now - timedelta(hours=1), name="oops",
                  ran=timedelta(minutes=1)),
        ended_job(member, team, outcome=Outcome.SUCCEEDED, at=now - timedelta(minutes=30), name="one-liner",
                  command="echo \"it's done\" > out.txt"),
    ]  # fmt: skip
    store_output(jobs[0], "frames.txt", b"frame 1\n")
    # A pipeline broken in the middle: fetch succeeds, clean fails, train is cancelled for it.
    fetch = jobs[0]
    clean = submit_job(member, team, name="clean data", after=[("ok", fetch)])
    train = submit_job(member, team, name="train on clean", after=[("ok", clean)])
    schedule_pass(now=now)
    clean.refresh_from_db()
    if clean.stage == "rent":
        run_to_release(clean, now=now, outcome=Outcome.FAILED, exit_code=1, reason="exited with code 1")
    schedule_pass(now=now)
    train.refresh_from_db()
    assert train.outcome == Outcome.CANCELLED, (train.stage, train.outcome, train.wait_reason, train.reason)
    waiting = submit_job(member, team, name="after the pipeline", after=[("any", train)], cpus=64)
    array = JobArrayFactory(team=team, submitted_by=member, name="sweep")
    tasks = array_tasks(array, RuntimeImageFactory(), [("release", "succeeded"), ("release", "failed"),
                                                       ("release", "out_of_memory"), ("submit", "")])  # fmt: skip
    template = JobTemplate.objects.create(team=team, name="retrain", image=RuntimeImageFactory(),
                                          command="python3 /data/train.py {epochs}")  # fmt: skip
    schedule = schedule_of(member, team, now=now)
    webhook, _ = webhook_of(team, member, "http://127.0.0.1:19009/hook")
    enqueue(team.pk, "job.released", {}, now=now)
    round = start_round(node, "runc", now=now, trigger="test", only=["root"])
    schedule_pass(now=now)
    for result in round.results.all():
        logs.append(result.job_id, 0, b"uid=10001\n")
        probe = Job.objects.get(pk=result.job_id)
        if probe.stage == "rent":
            run_to_release(probe, now=now)
    judge_round(round, now=now)

    s = Site()
    for name in ["dashboard:review", "jobs:list", "jobs:new", "jobtemplates:list", "schedules:list", "usage",
                 "accounting:statements", "utilisation", "account", "notify:notifications", "webhooks:page",
                 "isolation:page", "login", "ops:operator", "ops:nodes", "ops:usage"]:  # fmt: skip
        s.add(name)
    s.add("dashboard:review_now", htmx=True)
    s.add("ops:nodes", htmx=True)
    s.add("jobs:list", query="outcome=failed&outcome=cancelled")
    s.add("jobs:list", htmx=True)
    s.add("jobs:estimate", query="cpus=2&memory_mb=512&time_limit_s=600&image=busybox", htmx=True)
    for job in [*jobs, clean, train, waiting, *tasks]:
        s.add("jobs:detail", job.pk)
        s.add("jobs:live", job.pk, htmx=True)
        s.add("jobs:log_lines", job.pk, htmx=True)
        s.add("jobs:resubmit", job.pk)
    s.add("jobs:preview", jobs[0].pk, "frames.txt", htmx=True)
    s.add("jobs:array", array.pk)
    s.add("jobtemplates:run", template.pk)
    s.add("accounting:statement", team.slug, f"{now:%Y-%m}")
    s.add("webhooks:deliveries", webhook.pk)
    s.add("webhooks:deliveries", webhook.pk, htmx=True)
    for result in round.results.all():
        s.add("isolation:result", result.pk)
        s.add("isolation:result", result.pk, htmx=True)
    s.add("schedules:edit", schedule.pk)
    s.add("schedules:delete", schedule.pk)
    s.add("ops:node", node.name)
    s.add("ops:node_action", node.name, "drain")
    assert Schedule.objects.filter(pk=schedule.pk).exists() and JobArray.objects.filter(pk=array.pk).exists()
    return s


def test_every_route_is_read_here_or_skipped_with_a_reason(site):
    unread = [
        name
        for name, pattern in routes().items()
        if name not in site.visits
        and name not in SKIPPED
        and not any(name.startswith(prefix) for prefix in SKIPPED_PREFIXES)
        and not any(pattern.lstrip("^").startswith(prefix) for prefix in SKIPPED_PATHS)
    ]
    assert unread == []
    assert not [name for name in SKIPPED if name not in routes()]  # a skip for a route that is gone


def operators_only(name: str) -> bool:
    return name == "utilisation" or (name.startswith("ops:") and name != "ops:usage")


@pytest.mark.parametrize("persona", ["member", "operator"])
def test_no_page_shows_template_syntax_a_python_repr_or_a_raw_id(site, client, request, persona):
    client.force_login(request.getfixturevalue(persona))
    found: dict[str, list[str]] = {}
    for name, visits in site.visits.items():
        for url, headers in visits:
            response = client.get(url, **headers)
            # The member's team owns every object here: each page answers, but the operators' (404). An operator in
            # no team meets a 404 on the team's own pages (as another team would) and reads the rest.
            if persona == "member":
                answers = (404,) if operators_only(name) else (200, 286)
            else:
                answers = (200, 286) if operators_only(name) else (200, 286, 404)
            assert response.status_code in answers, (url, persona, response.status_code)
            html = "text/html" in response.get("Content-Type", "") and response.status_code in (200, 286)
            if html and (said := internal_text(response.content.decode())):
                found[url + (" (htmx)" if headers else "")] = said
    assert found == {}, "\n".join(f"{url}: {said}" for url, said in found.items())


def test_the_check_finds_what_it_looks_for():
    page = (
        "<p>{# a comment</p><p>&lt;QuerySet []&gt;</p><p>job 73a84091-3ffe-4c7e-9a55-0b4b8f2a3c11 ended</p>"
        f'<a href="/jobs/{uuid.uuid4()}/">train</a><code>{uuid.uuid4()}</code><script>var a = "{{{{";</script>'
    )
    assert len(internal_text(page)) == 3


def test_a_job_its_pipeline_cancelled_names_the_dependency_and_links_to_it(site, client, member):
    client.force_login(member)
    train = Job.objects.get(name="train on clean")
    clean = Job.objects.get(name="clean data")

    page = client.get(reverse("jobs:detail", args=[train.pk])).content.decode()

    assert f'its dependency can never be met: job <a href="/jobs/{clean.pk}/">clean data</a> ended failed' in page


def test_a_one_line_script_is_shown_as_written(site, client, member):
    client.force_login(member)
    job = Job.objects.get(name="one-liner")

    text = VisibleText()
    text.feed(client.get(reverse("jobs:detail", args=[job.pk])).content.decode())

    assert 'echo "it\'s done" > out.txt' in " ".join(text.code)
    assert "'\"'\"'" not in " ".join(text.prose + text.code)


# --- the admin ---------------------------------------------------------------------------------------------------


class AdminText(VisibleText):
    """The admin's text: an object's own id in its `id` column or field (class "field-id") is there to be found by and
    copied, as in <code>; anywhere else (a title, a link to it, a sentence) it is a raw id."""

    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self) -> None:
        super().__init__()
        self._depth = 0
        self._id_at: int | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        super().handle_starttag(tag, attrs)
        if tag in self.VOID:
            return
        self._depth += 1
        if self._id_at is None and "field-id" in (dict(attrs).get("class") or "").split():
            self._id_at = self._depth

    def handle_endtag(self, tag: str) -> None:
        super().handle_endtag(tag)
        if tag in self.VOID:
            return
        if self._id_at == self._depth:
            self._id_at = None
        self._depth -= 1

    def handle_data(self, data: str) -> None:
        if self._id_at is not None and not self._hidden:
            self.code.append(data)
        else:
            super().handle_data(data)


def admin_pages(operator) -> list[tuple[str, int]]:
    """Every page of the admin an operator reads, from its registry: the index, each app's, and for each model its
    list, its add page, every object's page (the data has a bit of everything: each outcome, a job its pipeline
    doomed) and the first one's history and delete pages, each with the status the model's admin gives."""
    request = RequestFactory().get("/admin/")
    request.user = operator
    pages = {reverse("admin:index"): 200}
    for model, model_admin in admin.site._registry.items():
        meta = model._meta
        name = f"admin:{meta.app_label}_{meta.model_name}"
        pages[reverse("admin:app_list", args=[meta.app_label])] = 200
        pages[reverse(f"{name}_changelist")] = 200
        pages[reverse(f"{name}_add")] = 200 if model_admin.has_add_permission(request) else 403
        objects = list(model_admin.get_queryset(request))
        pages |= {reverse(f"{name}_change", args=[quote(obj.pk)]): 200 for obj in objects}
        if not objects:
            continue
        obj, pk = objects[0], quote(objects[0].pk)
        pages[reverse(f"{name}_history", args=[pk])] = 200
        pages[reverse(f"{name}_delete", args=[pk])] = 200 if model_admin.has_delete_permission(request, obj) else 403
    return list(pages.items())


@pytest.fixture
def admin_site(site, client, member, team, operator):
    """The site's data and what only operators make: rates, a budget and its extension, a store quota, a ledger
    check, a maintenance window, a queue, a group, a token, a node drained and resumed and its features changed in
    the admin, a failed sign-in and a good one."""
    now = timezone.now()
    node = Node.objects.get(name="n1")
    set_state(node, Node.State.DRAINING, now=now, acting_user=operator, reason="fan noise")
    set_state(node, Node.State.ACTIVE, now=now, acting_user=operator, reason="fan replaced")
    RateCard.objects.create(effective_from=now + timedelta(days=1), runtime_image="python", core_hour=Decimal("0.05"),
                            gb_hour=Decimal("0.01"), gpu_hour=Decimal("1"), note="new hardware",
                            created_at=now, created_by=operator)  # fmt: skip
    Budget.objects.create(team=team, monthly=Decimal("50.00"))
    extend(team, amount=Decimal("10.00"), reason="a deadline", by=operator, now=now)
    StoreQuota.objects.create(team=team, effective_from=now + timedelta(days=1), quota_bytes=2**30, note="more room",
                              created_at=now, created_by=operator)  # fmt: skip
    verify_and_keep()
    start = now + timedelta(days=1)
    window = MaintenanceWindow.objects.create(starts_at=start, ends_at=start + timedelta(hours=2), reason="kernel",
                                              created_at=now, created_by=operator)  # fmt: skip
    window.nodes.set([node])
    Queue.objects.create(name="urgent", priority=100, preempts_lower=True).teams.set([team])
    Group.objects.create(name="auditors").permissions.add(Permission.objects.get(codename="view_job"))
    token_for(member)
    client.post(reverse("login"), {"username": member.username, "password": "wrong"})
    client.post(reverse("login"), {"username": operator.username, "password": "pw-for-tests-1"})
    change = reverse("admin:pool_node_change", args=[node.pk])
    hidden = dict(
        re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', client.get(change).content.decode())
    )
    assert client.post(change, {**hidden, "features": "bigmem, nvme"}).status_code == 302
    return site


def test_no_admin_page_shows_template_syntax_a_python_repr_or_a_raw_id(admin_site, client, operator):
    client.force_login(operator)
    found: dict[str, list[str]] = {}
    for url, status in admin_pages(operator):
        response = client.get(url)
        assert response.status_code == status, (url, response.status_code)
        if status == 200 and (said := internal_text(response.content.decode(), AdminText())):
            found[url] = said
    assert found == {}, "\n".join(f"{url}: {said}" for url, said in found.items())


def test_the_admin_check_allows_an_objects_id_in_its_id_column_alone():
    job = uuid.uuid4()
    page = (
        f'<tr><td class="field-id">{job}</td><td class="field-name"><a href="/admin/jobs/job/{job}/">train</a></td>'
        f'<td class="field-job">{uuid.uuid4()}</td></tr><h2>Hold object ({uuid.uuid4()})</h2>'
        "<div class=\"readonly\">{'cpus': 2}</div>"
    )
    assert len(internal_text(page, AdminText())) == 4  # the job column's id; the title's object and id; the dict
