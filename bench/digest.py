"""The morning digest's preparation (issue 23): 1,000 members of 50 teams, 100,000 jobs ended in the last
24 hours, every member due in the same pass. No containers, no SMTP: the pass writes the mails to the outbox.

The data, made by bulk_create (one hold and one record per job, a fake but unique ledger hash): per team
2,000 jobs, of which 400 are the tasks of 4 arrays and 60 the steps of 20 three-step pipelines, outcomes
mixed (88 % succeeded, the rest failed, out of memory, timed out, cancelled); 40 names per team; teams in
five time zones, half with a budget, each with a schedule whose two runs were missed; every tenth member in
two teams.

Measured, medians of three runs (each from the same state: no Preference rows, no mail):
- `digest_prepare_s`: notify.digest.prepare, every member due: 1,000 mails written;
- `digest_quiet_pass_ms`: the next pass, which finds nobody due (the cost of the pass every minute);
- the anchor, in the same run: one plain aggregate query over the same rows, the ended jobs counted by team
  and outcome and the records' cost summed by team (`anchor_s`), and the ratio beside it.

Prints the headline figures last. Run: .venv/bin/python bench/digest.py [--members N] [--jobs N] [--teams N]
"""

import argparse
import hashlib
import os
import statistics
import uuid

from _setup import Timer, machine, throwaway_database

ZONES = ["UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo", "Asia/Kolkata"]
ARRAYS_PER_TEAM, TASKS_PER_ARRAY = 4, 100
PIPELINES_PER_TEAM, STEPS = 20, 3
NAMES = 40
BATCH = 5000


def uid(kind: str, i: int) -> uuid.UUID:
    return uuid.UUID(hex=hashlib.md5(f"{kind}{i}".encode()).hexdigest())


def outcome_of(i: int) -> tuple[str, int | None, str]:
    rest = i % 100
    if rest < 88:
        return "succeeded", 0, ""
    if rest < 95:
        return "failed", 1, "exit code 1"
    if rest < 97:
        return "out_of_memory", 137, "used more than its 512 MB"
    if rest < 98:
        return "timed_out", None, "ran past its time limit (2 h)"
    return "cancelled", None, "cancelled by its submitter"


def populate(now, *, teams_n: int, members: int, jobs_n: int):
    """Teams, members, jobs (alone, array tasks, pipeline steps), their holds and records, schedule runs."""
    from datetime import timedelta
    from decimal import Decimal

    from django.contrib.auth import get_user_model
    from django.db import connection

    from accounting.models import Budget, BudgetUnit, Record
    from jobs.models import Dependency, Job, JobArray, RuntimeImage
    from pool.models import Hold
    from pool.nodes import Capacity, register
    from schedules.models import RunStatus, Schedule, ScheduleRun
    from teams.models import Membership, Team

    User = get_user_model()
    image = RuntimeImage.objects.create(name="busybox", reference="e31/busybox:1")
    node = register("n0", Capacity(cpu_ids=list(range(64)), memory_mb=256 * 1024, gpu_ids=[]), now=now)
    teams = Team.objects.bulk_create(
        [Team(slug=f"t{i:03d}", name=f"Team {i}", time_zone=ZONES[i % len(ZONES)]) for i in range(teams_n)]
    )
    users = User.objects.bulk_create(
        [User(username=f"u{i:04d}", email=f"u{i:04d}@example.test", password="!") for i in range(members)]
    )
    per_team = members // teams_n
    memberships = [Membership(team=teams[i // per_team % teams_n], user=u) for i, u in enumerate(users)]
    memberships += [Membership(team=teams[(i // per_team + 1) % teams_n], user=u) for i, u in enumerate(users)
                    if i % 10 == 0]  # fmt: skip
    Membership.objects.bulk_create(memberships)
    Budget.objects.bulk_create([Budget(team=t, unit=BudgetUnit.MONEY, monthly=Decimal("5000.00")) for t in teams[::2]])
    submitter = {t.pk: users[i * per_team] for i, t in enumerate(teams)}
    window = timedelta(hours=23)
    per_team_jobs = jobs_n // teams_n
    arrays: list[JobArray] = []
    for t in teams:
        arrays += [
            JobArray(id=uid(f"a{t.pk}-", k), team=t, submitted_by=submitter[t.pk], name=f"sweep {k}",
                     size=TASKS_PER_ARRAY, submitted_at=now - window, released_at=now - timedelta(hours=1))
            for k in range(ARRAYS_PER_TEAM)
        ]  # fmt: skip
    JobArray.objects.bulk_create(arrays)
    jobs, holds, records, links = [], [], [], []
    sequence = 0
    for t_index, t in enumerate(teams):
        for k in range(per_team_jobs):
            i = t_index * per_team_jobs + k
            outcome, exit_code, reason = outcome_of(i)
            released = now - window + window * (k + 0.5) / per_team_jobs
            job = Job(id=uid("j", i), team=t, submitted_by=submitter[t.pk], name=f"job {k % NAMES}", image=image,
                      command=["true"], cpus=1, memory_mb=512, time_limit_s=7200, stage="release", outcome=outcome,
                      exit_code=exit_code, reason=reason, submitted_at=released - timedelta(minutes=30),
                      held_at=released - timedelta(minutes=20), started_at=released - timedelta(minutes=20),
                      finished_at=released, released_at=released)  # fmt: skip
            tasks = ARRAYS_PER_TEAM * TASKS_PER_ARRAY
            if k < tasks:
                job.array_id, job.array_index = uid(f"a{t.pk}-", k // TASKS_PER_ARRAY), k % TASKS_PER_ARRAY
                job.name = f"sweep {k // TASKS_PER_ARRAY}[{k % TASKS_PER_ARRAY}]"
            elif k < tasks + PIPELINES_PER_TEAM * STEPS and (k - tasks) % STEPS:
                job.name = f"step {(k - tasks) % STEPS}"
                links.append(Dependency(job_id=job.id, on_job_id=uid("j", i - 1), kind="ok"))
            jobs.append(job)
            sequence += 1
            hold = Hold(id=uid("h", i), job_id=job.id, node=node, cpu_set=[0], memory_mb=512, held_at=job.held_at,
                        released_at=released, runtime="runc")  # fmt: skip
            holds.append(hold)
            digest = hashlib.sha256(f"r{i}".encode()).hexdigest()
            records.append(
                Record(hold_id=hold.id, job_id=job.id, team=t, node="n0", cpu_set=[0], cpus=1, memory_mb=512, gpus=0,
                       held_at=job.held_at, released_at=released, held_seconds=Decimal(1200),
                       cpu_seconds=Decimal(900), cost=Decimal("0.013333"), outcome=outcome, sequence=sequence,
                       prev_hash="0" * 64, hash=digest)
            )  # fmt: skip
    Job.objects.bulk_create(jobs, batch_size=BATCH)
    Hold.objects.bulk_create(holds, batch_size=BATCH)
    Record.objects.bulk_create(records, batch_size=BATCH)
    Dependency.objects.bulk_create(links, batch_size=BATCH)
    for t in teams:
        schedule = Schedule.objects.create(
            team=t, name="nightly", cron="0 1 * * *", time_zone=t.time_zone, job={"command": ["true"]},
            created_by=submitter[t.pk], created_at=now - window, changed_at=now - window,
        )  # fmt: skip
        ScheduleRun.objects.bulk_create(
            ScheduleRun(schedule=schedule, planned_at=now - timedelta(hours=h), status=RunStatus.MISSED,
                        reason="the pool was down", recorded_at=now - timedelta(hours=h))
            for h in (20, 19)
        )  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return len(users), len(memberships), len(jobs), len(links)


def anchor(since, now) -> float:
    """One plain aggregate query over the same rows: ended jobs by team and outcome, cost by team."""
    from django.db import connection

    sql = """
        SELECT j.team_id, j.outcome, count(*), (
            SELECT sum(r.cost) FROM accounting_record r
            WHERE r.team_id = j.team_id AND r.released_at >= %s AND r.released_at < %s)
        FROM jobs_job j WHERE j.stage = 'release' AND j.released_at >= %s AND j.released_at < %s
        GROUP BY j.team_id, j.outcome
    """
    with Timer() as timer, connection.cursor() as cursor:
        cursor.execute(sql, [since, now, since, now])
        assert cursor.fetchall()
    return timer.seconds


def reset() -> None:
    from notify.models import Mail, Preference

    Mail.objects.all().delete()
    Preference.objects.all().delete()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--teams", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    os.environ["EMAIL_HOST"] = "127.0.0.1"  # mail on: the pass writes to the outbox, nothing is sent here
    throwaway_database("e31_bench_digest")
    from datetime import UTC, datetime, timedelta

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from jobs.scheduling import dispatch
    from notify.digest import prepare
    from notify.models import Mail

    dispatch.send = lambda task, *, args=None, queue=None, eta=None: None  # no broker: the sender is not run
    now = datetime(2030, 3, 12, 13, 0, tzinfo=UTC)  # past 07:00 in every zone of ZONES
    with Timer() as made:
        people, memberships, jobs, links = populate(now, teams_n=args.teams, members=args.members, jobs_n=args.jobs)
    since = now - timedelta(days=1)
    anchor(since, now)  # warm, as the digest's first query warms its own
    prepare_s, quiet_s, anchor_s = [], [], []
    for _ in range(args.repeats):
        reset()
        anchor_s.append(anchor(since, now))
        with Timer() as timer:
            written = prepare(now=now)
        prepare_s.append(timer.seconds)
        assert written == people, f"{written} digests for {people} people"
        with Timer() as quiet:
            assert prepare(now=now + timedelta(minutes=1)) == 0
        quiet_s.append(quiet.seconds)
    reset()
    with CaptureQueriesContext(connection) as queries:
        prepare(now=now)
    bodies = [len(body) for body in Mail.objects.values_list("body", flat=True)]
    prepared, quiet_pass, anchored = (statistics.median(s) for s in (prepare_s, quiet_s, anchor_s))
    print(machine())
    print(
        f"data: {args.teams} teams in {len(ZONES)} zones, {people} members ({memberships} memberships), {jobs} jobs "
        f"ended in 24 h ({args.teams * ARRAYS_PER_TEAM} arrays, {links} dependencies), made in {made.seconds:.0f} s"
    )
    print(f"a pass: {len(queries)} queries, {people} mails, body {min(bodies)}–{max(bodies)} characters")
    print(
        f"runs (s): prepare {' '.join(f'{s:.3f}' for s in prepare_s)}, quiet pass "
        f"{' '.join(f'{s:.3f}' for s in quiet_s)}, anchor {' '.join(f'{s:.3f}' for s in anchor_s)}"
    )
    print(f"anchor_s: {anchored:.3f} s")
    print(f"digest_prepare_s: {prepared:.3f} s")
    print(f"digest_vs_anchor_ratio: {prepared / anchored:.1f}")
    print(f"digest_quiet_pass_ms: {quiet_pass * 1000:.1f} ms")
    print(f"digest_quiet_pass_vs_anchor_ratio: {quiet_pass / anchored:.2f}")


if __name__ == "__main__":
    main()
