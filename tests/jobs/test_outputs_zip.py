"""outputs.zip (jobs.storage.store.zip_stream): what the web server spends on it is reading the store."""

import io
import zipfile

from django.utils import timezone

from jobs.models import Outcome
from jobs.storage.store import zip_stream
from tests.factories import ended_job, store_output


def test_the_zip_stores_outputs_as_they_are_so_a_download_costs_no_compression(member, team, local_node):
    job = ended_job(member, team, outcome=Outcome.SUCCEEDED, at=timezone.now())
    store_output(job, "table.csv", b"epoch,loss\n" * 1000)
    store_output(job, "nested/model.bin", bytes(range(256)) * 64)

    archive = zipfile.ZipFile(io.BytesIO(b"".join(zip_stream(job.pk, job.output_files.values_list("path", "size")))))

    assert {info.compress_type for info in archive.infolist()} == {zipfile.ZIP_STORED}
    assert archive.read("table.csv") == b"epoch,loss\n" * 1000 and archive.testzip() is None
    assert sorted(archive.namelist()) == ["nested/model.bin", "table.csv"]
