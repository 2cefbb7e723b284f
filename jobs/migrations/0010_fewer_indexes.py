"""Indexes no query needs: one a prefix of another, the LIKE index of `stage`, and the job's own index
on the tables whose unique constraint leads with the job already. Dropped by name only: Django's
AlterField would also drop and add the foreign keys again, which checks every row of the log tables."""

import django.db.models.deletion
from django.db import migrations, models

FK_INDEXES = {
    "datafile": ("data_files", "jobs_datafile", "jobs_datafile_job_id_6ed7678a"),
    "outputfile": ("output_files", "jobs_outputfile", "jobs_outputfile_job_id_6869861b"),
    "logchunk": ("log_chunks", "jobs_logchunk", "jobs_logchunk_job_id_aad6b849"),
    "logspan": ("log_spans", "jobs_logspan", "jobs_logspan_job_id_96adfc18"),
}
STAGE_CHOICES = [("submit", "Submit"), ("rent", "Rent"), ("run", "Run"), ("output", "Output"), ("release", "Release")]


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0009_merge_dash_ops_acct_logs"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="job", name="jobs_job_team_id_50a4ac_idx"),
        migrations.SeparateDatabaseAndState(
            state_operations=[
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
            ],
            database_operations=[
                *(
                    migrations.RunSQL(
                        f'DROP INDEX IF EXISTS "{index}"',
                        reverse_sql=f'CREATE INDEX "{index}" ON "{table}" ("job_id")',
                    )
                    for _, table, index in FK_INDEXES.values()
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "jobs_job_stage_19832d22"',
                    reverse_sql='CREATE INDEX "jobs_job_stage_19832d22" ON "jobs_job" ("stage")',
                ),
                # PostgreSQL's only (Django adds it for an indexed text column there); not made again.
                migrations.RunSQL('DROP INDEX IF EXISTS "jobs_job_stage_19832d22_like"', reverse_sql=""),
            ],
        ),
        migrations.AddIndex(model_name="job", index=models.Index(fields=["stage"], name="job_stage")),
    ]
