"""scripts/supervise.sh keeps `make run`'s worker and beat running: a process that exits is started
again, and stopping the supervisor stops its process."""

import os
import signal
import subprocess

from tests.conftest import ROOT, wait_until

SUPERVISE = ROOT / "scripts" / "supervise.sh"
# Exits with status 3 the first time (as a crashed worker would), then stays up.
FLAKY = 'echo "started $$"; if [ ! -f crashed ]; then touch crashed; exit 3; fi; exec sleep 300'


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_process_that_exits_is_started_again_and_stopped_with_its_supervisor(tmp_path):
    supervisor = subprocess.Popen([SUPERVISE, "flaky", "sh", "-c", FLAKY], cwd=tmp_path, start_new_session=True)
    log = tmp_path / "var" / "log" / "flaky.log"
    try:
        wait_until(lambda: log.exists() and log.read_text().count("started") == 2, 10, 0.05,
                   message="the process to be started again")  # fmt: skip
        assert "[supervise] flaky exited with status 3" in log.read_text()
        assert (tmp_path / "var" / "run" / "flaky.pid").read_text().strip() == str(supervisor.pid)
        second = int(log.read_text().splitlines()[-1].split()[-1])
        assert not gone(second)

        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(10) == 0
    finally:
        if supervisor.poll() is None:
            os.killpg(supervisor.pid, signal.SIGKILL)
    wait_until(lambda: gone(second), 10, 0.05, message="the supervised process to stop")
    assert not (tmp_path / "var" / "run" / "flaky.pid").exists()
    assert log.read_text().count("started") == 2, "not started again once stopped"
