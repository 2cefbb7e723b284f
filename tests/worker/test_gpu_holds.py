"""GPU holds end to end up to the engine's configuration (these machines have no GPU)."""

from django.utils import timezone

from jobs.lifecycle.actions import schedule_pass
from pool.nodes import Capacity, register
from tests.factories import submit_job
from worker import runner
from worker.sandbox.docker import DockerSandbox
from worker.scratch import Scratch


def test_a_gpu_job_is_held_by_device_id_and_its_container_gets_only_those_devices(member, team):
    register("gpu-node", Capacity(cpu_ids=[0, 1], memory_mb=4096, gpu_ids=["GPU-aaa", "GPU-bbb", "GPU-ccc"]),
             now=timezone.now())  # fmt: skip
    first = submit_job(member, team, gpus=2)
    second = submit_job(member, team, gpus=1)

    holds = {h.job_id: h for h in schedule_pass(now=timezone.now())}

    assert holds[first.pk].gpu_ids == ["GPU-aaa", "GPU-bbb"]
    assert holds[second.pk].gpu_ids == ["GPU-ccc"]
    first.refresh_from_db()
    spec = runner._spec(first, holds[first.pk], Scratch(first.pk, uid=10001))
    config = DockerSandbox(client=object()).container_config(spec)
    [request] = config["device_requests"]
    assert request["DeviceIDs"] == ["GPU-aaa", "GPU-bbb"]
    assert request["Capabilities"] == [["gpu"]]
    assert request["Count"] == 0  # not -1, which would mean every gpu of the machine


def test_a_job_without_gpus_gets_no_device(member, team):
    register("gpu-node", Capacity(cpu_ids=[0], memory_mb=4096, gpu_ids=["GPU-aaa"]), now=timezone.now())
    job = submit_job(member, team, gpus=0)

    [hold] = schedule_pass(now=timezone.now())

    job.refresh_from_db()
    config = DockerSandbox(client=object()).container_config(runner._spec(job, hold, Scratch(job.pk, uid=10001)))
    assert hold.gpu_ids == [] and "device_requests" not in config
