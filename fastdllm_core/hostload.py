"""How busy the host was while something was timed: a tokens/s figure taken on a busy machine is not a
measurement, so every throughput and training-speed row says how much CPU other processes used meanwhile.

:class:`HostLoad` reads the kernel's CPU counters (``/proc/stat``) and this process' own CPU time
(``getrusage``, children included) at the start and end of an interval:

* ``host_other_cpu_frac`` -- CPU time used by *other* processes over the interval, as a share of the machine
  (all cores x wall time): 0 on an idle machine, 0.5 when another program kept one of two cores busy;
* ``process_cpu_util`` -- this process' CPU time over the wall time (1.0 = one core fully used);
* ``host_load1`` -- the 1-minute load average at the end;
* ``host_busy`` -- ``host_other_cpu_frac`` above :data:`BUSY_FRAC`; the caller warns and the row says so.

Where ``/proc/stat`` does not exist (not Linux) the columns read "not available".
"""
from __future__ import annotations

import logging
import os
import resource
import time

log = logging.getLogger(__name__)

BUSY_FRAC = 0.10  # other processes used more than 10% of the machine
NOT_AVAILABLE = "not available"
COLUMNS = ["host_other_cpu_frac", "process_cpu_util", "host_load1", "host_cpus", "host_busy"]


def _proc_stat() -> tuple[float, float] | None:
    """(busy seconds, total seconds) summed over all CPUs since boot, or None off Linux."""
    try:
        with open("/proc/stat") as fh:
            fields = fh.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    v = [float(x) for x in fields[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    idle = v[3] + (v[4] if len(v) > 4 else 0.0)  # idle + iowait
    total = sum(v[:8])  # user nice system idle iowait irq softirq steal (guest time is inside user)
    return (total - idle) / hz, total / hz


def _own_cpu() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


class HostLoad:
    """``with HostLoad() as h: ...`` then ``h.summary()``; or ``h.start()`` / ``h.sample()`` for intervals.

    ``processes``: identical processes working together (data-parallel training ranks): each counts its own CPU
    time that many times, so its siblings are not taken for other load."""

    def __init__(self, processes: int = 1):
        self.cpus = os.cpu_count() or 1
        self.processes = processes
        self._t = self._stat = self._own = None
        self.last: dict | None = None

    def start(self) -> "HostLoad":
        self._t, self._stat, self._own = time.perf_counter(), _proc_stat(), _own_cpu()
        return self

    def sample(self) -> dict:
        """The interval since :meth:`start` (or the previous sample) as row columns; starts the next interval."""
        t, stat, own = time.perf_counter(), _proc_stat(), _own_cpu()
        wall = max(t - self._t, 1e-9)
        util = (own - self._own) / wall
        if stat is None or self._stat is None:
            out = {"host_other_cpu_frac": NOT_AVAILABLE, "process_cpu_util": round(util, 3),
                   "host_load1": NOT_AVAILABLE, "host_cpus": self.cpus, "host_busy": NOT_AVAILABLE}
        else:
            busy = stat[0] - self._stat[0]
            other = max(0.0, busy - self.processes * (own - self._own)) / (self.cpus * wall)
            out = {"host_other_cpu_frac": round(min(other, 1.0), 3), "process_cpu_util": round(util, 3),
                   "host_load1": round(os.getloadavg()[0], 2), "host_cpus": self.cpus,
                   "host_busy": other > BUSY_FRAC}
        self._t, self._stat, self._own = t, stat, own
        self.last = out
        return out

    def __enter__(self) -> "HostLoad":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.sample()

    def summary(self) -> dict:
        return dict(self.last) if self.last else self.sample()


def warn_if_busy(row: dict, what: str) -> None:
    """Log a warning naming ``what`` when the row's interval was taken on a busy host."""
    if row.get("host_busy") is True:
        log.warning("%s was measured while other processes used %.0f%% of the machine's %d CPUs (load %.2f): "
                    "its timing is not a clean measurement", what, 100 * row["host_other_cpu_frac"],
                    row["host_cpus"], row["host_load1"])
