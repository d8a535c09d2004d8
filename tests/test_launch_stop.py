"""A stopped launch is a stop (fastdllm_core.training.launch.run_until_stopped): the launcher gets SIGTERM and time
to let its ranks checkpoint, never an immediate SIGKILL; a launcher that ignores it is killed after the grace."""
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from fastdllm_core.training.launch import run_until_stopped, stop_gracefully

pytestmark = pytest.mark.slow  # each test starts a process

CHILD = """
import signal, sys, time
marker = sys.argv[1]
def stop(*_):
    open(marker, "w").write("checkpointed")
    sys.exit(3)
signal.signal(signal.SIGTERM, stop if sys.argv[2] == "polite" else signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.SIG_IGN)
open(marker + ".ready", "w").write("")
time.sleep(60)
"""


def _child(tmp_path, kind):
    marker = tmp_path / "marker"
    return [sys.executable, "-c", CHILD, str(marker), kind], marker


def _wait_ready(marker, timeout=30):
    end = time.monotonic() + timeout
    while not os.path.exists(f"{marker}.ready"):
        assert time.monotonic() < end, "the child did not start"
        time.sleep(0.05)


def test_an_interrupted_launch_passes_the_stop_on_and_waits_for_the_checkpoint(tmp_path):
    cmd, marker = _child(tmp_path, "polite")

    def interrupt():
        _wait_ready(marker)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C: KeyboardInterrupt in the launching process

    # Python's own Ctrl-C handler, whether or not this process was started with SIGINT ignored (a background job)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=interrupt, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            run_until_stopped(cmd, dict(os.environ), grace_s=30)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert marker.read_text() == "checkpointed"  # the child got SIGTERM and finished its handler


def test_a_launcher_that_ignores_the_stop_is_killed_after_the_grace(tmp_path):
    cmd, marker = _child(tmp_path, "deaf")
    proc = subprocess.Popen(cmd)
    _wait_ready(marker)
    t0 = time.monotonic()
    assert stop_gracefully(proc, grace_s=1) == -signal.SIGKILL
    assert 1 <= time.monotonic() - t0 < 20 and not marker.exists()


def test_a_failed_launch_is_a_named_error():
    with pytest.raises(subprocess.CalledProcessError) as err:
        run_until_stopped([sys.executable, "-c", "raise SystemExit(7)"], dict(os.environ))
    assert err.value.returncode == 7
    run_until_stopped([sys.executable, "-c", "pass"], dict(os.environ))  # a clean exit returns
