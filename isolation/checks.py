"""Rounds of isolation probes, submitted as a system team's jobs and judged once released; a failure drains the node."""

import logging
import secrets
from contextlib import suppress
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile, UploadedFile
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.formats import outcome_label
from isolation import probes
from isolation.models import ProbeResult, ProbeRound, Verdict
from jobs.models import Isolation, Job, Outcome, RuntimeImage
from jobs.scheduling.dispatch import request_schedule
from jobs.storage.logs import read_log
from jobs.storage.store import output_key, read_range, store_secrets
from jobs.submit.declaration import Declaration
from jobs.submit.service import submit
from pool.models import Node
from pool.nodes import NodeOffline, proven, set_state, still_proving
from teams.models import Team
from teams.people import add_member, create_team

log = logging.getLogger(__name__)

SYSTEM_TEAM = "e31-isolation"  # the team the probes run as; its member is a user nobody signs in as
SYSTEM_USER = "e31-isolation"
# The platform's own jobs (the probes and their decoys): not a team's work, so kept apart from teams' failures.
PROBE_JOBS = Q(team__slug=SYSTEM_TEAM)
DECOY_S = 10  # how long the decoy holds its secret beside the probes
OUTPUT_READ_MAX = 1 << 20  # of each probe output the judge reads
NOT_RUN = {Outcome.CANCELLED, Outcome.NODE_LOST, Outcome.REJECTED}
# The folders left in /output's tmpfs beyond the output files (worker.scratch.OUTPUT_FOLDERS), and its root.
OUTPUT_FOLDERS = 64
ROUND_AGAIN_AFTER = timedelta(minutes=1)  # before a proving node's round whose probes did not run is run again
PROBE_IMAGE = "python"  # the runtime image the probes run in (probe_script.py is Python)


class ProbeImageMissing(Exception):
    """No round can start until the probes' runtime image is registered."""

    def __init__(self) -> None:
        super().__init__(f"its isolation probes need the runtime image {PROBE_IMAGE}, which is not registered")


def probe_image() -> RuntimeImage:
    image = RuntimeImage.objects.filter(name=PROBE_IMAGE).first()
    if image is None:
        raise ProbeImageMissing
    return image


def runtimes() -> dict[str, str]:
    """Runtime name → the isolation that selects it."""
    return {settings.E31_RUNTIME: Isolation.STANDARD, settings.E31_STRONG_RUNTIME: Isolation.STRONG}


def system_identity() -> tuple[User, Team]:
    team, _ = create_team(SYSTEM_TEAM, name="Isolation probes (system)")
    return add_member(SYSTEM_USER, team=team), team


@transaction.atomic
def start_round(node: Node, runtime: str, *, now: datetime, trigger: str, only: list[str] | None = None) -> ProbeRound:
    """Submit the probes as jobs pinned to `node` under `runtime`, after a decoy for the staged-data probe."""
    isolation = runtimes().get(runtime)
    if isolation is None:
        raise ValueError(f"unknown runtime {runtime!r}: one of {', '.join(runtimes())}")
    chosen = [probes.BY_NAME[name] for name in only] if only else probes.PROBES
    image = probe_image()
    user, team = system_identity()
    round = ProbeRound.objects.create(node=node, runtime=runtime, trigger=trigger, started_at=now)

    def job(name: str, *, memory_mb: int = 64, time_limit_s: int = 60, env: dict[str, str], extra: dict) -> Job:
        files: list[tuple[str, UploadedFile]] = [("probe.py", SimpleUploadedFile("probe.py", probes.SCRIPT.encode()))]
        files += [(n, SimpleUploadedFile(n, content.encode())) for n, content in extra.items()]
        declaration = Declaration(
            team=team, name=f"isolation probe {name} on {node.name} ({runtime})", image=image,
            command=["python3", "/data/probe.py", name], env=env, cpus=1, memory_mb=memory_mb, gpus=0,
            time_limit_s=time_limit_s, output_patterns=[], files=files, isolation=isolation, pinned_node=node,
        )  # fmt: skip
        return submit(declaration, user=user)[0]

    if any(p.name == "staged-data" for p in chosen):
        round.decoy_secret = probes.DECOY_MARKER + secrets.token_hex(16)
        round.decoy = job("decoy", env={"DECOY_S": str(DECOY_S)}, extra={"secret.txt": round.decoy_secret + "\n"})
        round.save(update_fields=["decoy", "decoy_secret"])
    env = {"PIDS_LIMIT": str(settings.E31_PIDS_LIMIT), "OUTPUT_FILES": str(settings.E31_OUTPUT_MAX_FILES)}
    for probe in chosen:
        env_of = {**env, "MEMORY_MB": str(probe.memory_mb)}
        made = job(probe.name, memory_mb=probe.memory_mb, time_limit_s=probe.time_limit_s, env=env_of, extra={})
        ProbeResult.objects.create(round=round, probe=probe.name, job=made)
    return round


def judge_round(round: ProbeRound, *, now: datetime) -> bool:
    """Judge a round whose jobs are all released (False while one is not); a failed probe drains the node."""
    with transaction.atomic():
        locked = ProbeRound.objects.select_for_update().get(pk=round.pk)
        if locked.judged_at is not None:
            return True
        ids = [r.job_id for r in locked.results.all() if r.job_id] + ([locked.decoy_id] if locked.decoy_id else [])
        if Job.objects.live().filter(pk__in=ids).exists():
            return False
        decoy = Job.objects.filter(pk=locked.decoy_id).first() if locked.decoy_id else None
        results = list(locked.results.select_related("job"))
        for result in results:
            result.verdict, result.evidence = _judge(result, locked, decoy)
            result.at = now
            result.save(update_fields=["verdict", "evidence", "at"])
        locked.judged_at = now
        locked.save(update_fields=["judged_at"])
    round.judged_at = now
    failed = [r.probe for r in results if r.verdict == Verdict.FAILED]
    if failed:
        reason = f"isolation probe {', '.join(failed)} failed under {locked.runtime} (evidence on /isolation/)"
        log.error("node %s: %s", locked.node.name, reason)
        with suppress(NodeOffline):
            set_state(locked.node, Node.State.DRAINING, now=now, reason=reason)
    return True


def judge_pending(*, now: datetime) -> int:
    judged = 0
    for round in ProbeRound.objects.filter(judged_at__isnull=True).order_by("started_at"):
        judged += judge_round(round, now=now)
    return judged


def probe_pool(*, now: datetime, trigger: str = "daily") -> list[ProbeRound]:
    nodes = list(Node.objects.filter(state=Node.State.ACTIVE))
    try:
        return [start_round(node, runtime, now=now, trigger=trigger) for node in nodes for runtime in runtimes()]
    except ProbeImageMissing:
        names = ", ".join(node.name for node in nodes)
        log.error("no isolation probes ran on %s: the runtime image %s is not registered", names, PROBE_IMAGE)
        return []


def probe_node_on_start(name: str, *, engine_runtimes: set[str] | None = None) -> list[ProbeRound]:
    """A round under each runtime on a node whose worker just started; a failure is logged, not raised."""
    try:
        node = Node.objects.get(name=name)
        chosen = [r for r in runtimes() if engine_runtimes is None or r in engine_runtimes]
        try:
            return [start_round(node, runtime, now=timezone.now(), trigger="start") for runtime in chosen]
        except ProbeImageMissing as missing:
            still_proving(node, reason=str(missing))
            log.error("node %s: %s (manage.py build_runtime_images builds it)", name, missing)
            return []
    except Exception:
        log.exception("the isolation probes of node %s could not be submitted", name)
        return []


def passed(round: ProbeRound) -> bool:
    """No probe of the judged round failed, and every probe did run."""
    results = list(round.results.select_related("job"))
    return (
        round.judged_at is not None
        and bool(results)
        and all(r.verdict != Verdict.FAILED and r.job is not None and r.job.outcome not in NOT_RUN for r in results)
    )


def prove(node: Node, *, now: datetime, engine_runtimes: set[str]) -> list[ProbeRound]:
    """Judge a proving node's rounds since it went proving: active once the last under each runtime passed, a new
    round for a runtime whose last did not (its probes did not run); return the rounds started."""
    chosen = [r for r in runtimes() if r in engine_runtimes]
    since = node.state_changed_at or node.registered_at
    last: dict[str, ProbeRound] = {}
    for round in ProbeRound.objects.filter(node=node, started_at__gte=since).order_by("started_at", "id"):
        if round.judged_at is None and judge_round(round, now=now):
            log.info("node %s: its round under %s was judged (passed: %s)", node.name, round.runtime, passed(round))
        last[round.runtime] = round
    if Node.objects.filter(pk=node.pk, state=Node.State.PROVING).count() == 0:
        return []  # drained by a failed probe, or resumed meanwhile
    if any(r.judged_at is None for r in last.values()):
        return []  # a round is still running
    if chosen and all(runtime in last and passed(last[runtime]) for runtime in chosen):
        with transaction.atomic():
            if proven(node, now=now, reason=f"its isolation probes passed under {', '.join(chosen)}"):
                request_schedule()  # the jobs waiting meanwhile may start on it now
        return []
    if not chosen:
        log.error("node %s: its engine has none of the runtimes %s; it stays proving", node.name, ", ".join(runtimes()))
        return []
    # A round whose probes could not run is run again, but not at every heartbeat: at most once a minute.
    again = [runtime for runtime in chosen if runtime not in last or _round_again(last[runtime], now=now)]
    if not again:
        return []
    try:
        started = [start_round(node, runtime, now=now, trigger="engine") for runtime in again]
    except ProbeImageMissing as missing:
        # Said on the node (the panel, the API) and logged once, not at every heartbeat: the first one
        # after the image is registered starts the rounds.
        if still_proving(node, reason=str(missing)):
            log.error("node %s: %s (manage.py build_runtime_images builds it)", node.name, missing)
        return []
    still_proving(node, reason=None)
    log.warning("node %s: its container engine answers; isolation probes under %s", node.name, ", ".join(again))
    return started


def _round_again(round: ProbeRound, *, now: datetime) -> bool:
    return not passed(round) and (round.judged_at or now) <= now - ROUND_AGAIN_AFTER


def _judge(result: ProbeResult, round: ProbeRound, decoy: Job | None) -> tuple[str, str]:
    job = result.job
    probe = probes.BY_NAME.get(result.probe)
    if job is None or probe is None:
        return Verdict.INCONCLUSIVE, "its job is gone"
    hold = job.last_hold
    if job.outcome in NOT_RUN or hold is None:
        return Verdict.INCONCLUSIVE, f"the probe did not run: {outcome_label(job.outcome)} ({job.reason})"
    if hold.node_id != round.node_id:
        return Verdict.INCONCLUSIVE, f"the probe ran on {hold.node.name}, not {round.node.name}"
    if hold.runtime and hold.runtime != round.runtime:
        return Verdict.FAILED, f"the probe ran under {hold.runtime}, not {round.runtime}"
    verdict = probe.verdict(seen(job, round, decoy))
    return verdict.verdict, verdict.evidence


def seen(job: Job, round: ProbeRound, decoy: Job | None) -> probes.Seen:
    text = read_log(job.pk, limit=4 << 20)[0].decode(errors="replace")
    report, lines = probes.parse_report(text)
    outputs = {}
    for output in job.output_files.all():
        outputs[output.path] = read_range(output_key(job.pk, output.path), 0, OUTPUT_READ_MAX)
    hold = job.last_hold
    assert hold is not None  # checked by the caller
    beside = None
    if decoy is not None:
        beside = bool(
            decoy.started_at and job.started_at and job.finished_at and decoy.started_at < job.finished_at
            and (decoy.finished_at is None or decoy.finished_at > job.started_at)
        )  # fmt: skip
    forbidden = [str(settings.VAR_DIR), str(settings.E31_SCRATCH_DIR), *store_secrets(), str(job.pk)]
    if decoy is not None:
        forbidden.append(str(decoy.pk))
    base = settings.E31_JOB_UID_BASE
    return probes.Seen(
        report=report,
        lines=lines,
        log=text,
        outcome=job.outcome,
        exit_code=job.exit_code,
        reason=job.reason,
        outputs=outputs,
        cpu_set=list(hold.cpu_set),
        memory_mb=hold.memory_mb,
        runtime=hold.runtime or round.runtime,
        uids=range(base, base + settings.E31_JOB_UID_COUNT),
        # As the probe was told (the node enforces its own settings: a difference shows as a failure).
        pids_limit=int(job.env.get("PIDS_LIMIT", settings.E31_PIDS_LIMIT)),
        output_files=int(job.env.get("OUTPUT_FILES", settings.E31_OUTPUT_MAX_FILES)),
        output_entries=int(job.env.get("OUTPUT_FILES", settings.E31_OUTPUT_MAX_FILES)) + OUTPUT_FOLDERS + 1,
        forbidden=[term for term in forbidden if term],
        decoy_secret=round.decoy_secret,
        beside_decoy=beside,
        node_cpus=len(hold.node.cpu_ids),
        decoy_ran=ran(decoy),
        probe_ran=ran(job),
    )


def ran(job: Job | None) -> str:
    if job is None or job.started_at is None:
        return ""
    end = f"{job.finished_at:%H:%M:%S}" if job.finished_at else "…"
    return f"{job.started_at:%H:%M:%S}–{end} UTC"
