"""Indexes no query needs: one a prefix of another, the LIKE index of `stage`, and the job's own index
on the tables whose unique constraint leads with the job already.

Only indexes are dropped, by name: Django's AlterField would also drop and add the foreign keys again,
which checks every row of the log tables. `stage` keeps its btree, renamed on PostgreSQL rather than
built again (a CREATE INDEX blocks writes to the jobs while it runs). On PostgreSQL each statement waits
at most 10 s for its lock, so a busy table makes the migration fail (to be run again) rather than queue
every write behind it."""

import django.db.models.deletion
from django.db import migrations, models

FK_INDEXES = {
    "datafile": ("data_files", "jobs_datafile", "jobs_datafile_job_id_6ed7678a"),
    "outputfile": ("output_files", "jobs_outputfile", "jobs_outputfile_job_id_6869861b"),
    "logchunk": ("log_chunks", "jobs_logchunk", "jobs_logchunk_job_id_aad6b849"),
    "logspan": ("log_spans", "jobs_logspan", "jobs_logspan_job_id_96adfc18"),
}
STAGE_CHOICES = [("submit", "Submit"), ("rent", "Rent"), ("run", "Run"), ("output", "Output"), ("release", "Release")]
OLD_STAGE = "jobs_job_stage_19832d22"


def _run(schema_editor, *statements: str) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("SET LOCAL lock_timeout = '10s'")
    for statement in statements:
        schema_editor.execute(statement)


def forwards(apps, schema_editor) -> None:
    drops = [f'DROP INDEX IF EXISTS "{index}"' for _, _, index in FK_INDEXES.values()]
    if schema_editor.connection.vendor == "postgresql":
        stage = [f'DROP INDEX IF EXISTS "{OLD_STAGE}_like"', f'ALTER INDEX "{OLD_STAGE}" RENAME TO "job_stage"']
    else:
        stage = [f'DROP INDEX IF EXISTS "{OLD_STAGE}"', 'CREATE INDEX "job_stage" ON "jobs_job" ("stage")']
    _run(schema_editor, 'DROP INDEX IF EXISTS "jobs_job_team_id_50a4ac_idx"', *drops, *stage)


def backwards(apps, schema_editor) -> None:
    creates = [f'CREATE INDEX "{index}" ON "{table}" ("job_id")' for _, table, index in FK_INDEXES.values()]
    if schema_editor.connection.vendor == "postgresql":
        stage = [
            f'ALTER INDEX "job_stage" RENAME TO "{OLD_STAGE}"',
            f'CREATE INDEX "{OLD_STAGE}_like" ON "jobs_job" ("stage" varchar_pattern_ops)',
        ]
    else:
        stage = ['DROP INDEX "job_stage"', f'CREATE INDEX "{OLD_STAGE}" ON "jobs_job" ("stage")']
    team = 'CREATE INDEX "jobs_job_team_id_50a4ac_idx" ON "jobs_job" ("team_id", "submitted_at" DESC)'
    _run(schema_editor, team, *creates, *stage)


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0009_merge_dash_ops_acct_logs"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveIndex(model_name="job", name="jobs_job_team_id_50a4ac_idx"),
                *(
                    migrations.AlterField(
                        model_name=model,
                        name="job",
                        field=models.ForeignKey(
                            db_index=False,
                            on_delete=django.db.models.deletion.CASCADE,
                            related_name=related,
                            to="jobs.job",
                        ),
                    )
                    for model, (related, _, _) in FK_INDEXES.items()
                ),
                migrations.AlterField(
                    model_name="job",
                    name="stage",
                    field=models.CharField(choices=STAGE_CHOICES, default="submit", max_length=16),
                ),
                migrations.AddIndex(model_name="job", index=models.Index(fields=["stage"], name="job_stage")),
            ],
            database_operations=[migrations.RunPython(forwards, backwards)],
        ),
    ]
