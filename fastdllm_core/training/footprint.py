"""A process' resident memory with its anonymous and file-backed parts apart (Linux: ``RssAnon`` and ``RssFile``
of ``/proc/self/status``; elsewhere only the peak total, ``ru_maxrss``).

``ru_maxrss`` (``VmHWM``) counts the file-backed pages a process has mapped (memory-mapped files, its own code
and libraries): pages the kernel can drop and read again at any time.  The anonymous part (heap, tensors, Python
objects) is what the process needs; :class:`PeakRss` samples both in a thread and keeps their peaks.
"""
from __future__ import annotations

import resource
import sys
import threading
from pathlib import Path

FIELDS = {"RssAnon": "anon", "RssFile": "file", "RssShmem": "shmem", "VmRSS": "rss", "VmHWM": "hwm"}


def status() -> dict:
    """This process' resident memory now, MiB: ``anon``, ``file``, ``shmem``, ``rss`` and the peak ``hwm``
    (empty where ``/proc/self/status`` is not)."""
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in FIELDS:
            out[FIELDS[key]] = int(value.split()[0]) / 1024  # kB
    return out


def peak_rss_mib() -> float:
    """This process' peak resident memory so far (``ru_maxrss``: KiB on Linux, bytes on macOS), in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024


class PeakRss:
    """The peaks of the anonymous and the file-backed resident memory (MiB), sampled every ``interval`` seconds
    from its start to :meth:`stop` (``peaks`` is empty where the platform does not tell them apart)."""

    def __init__(self, interval: float = 0.05):
        self.peaks: dict = {}
        self._done = threading.Event()
        self._thread = None
        if self._sample():
            self._thread = threading.Thread(target=self._run, args=(interval,), name="peak-rss", daemon=True)
            self._thread.start()

    def _sample(self) -> bool:
        now = status()
        for k in ("anon", "file"):
            if k in now:
                self.peaks[k] = max(self.peaks.get(k, 0.0), now[k])
        return bool(now)

    def _run(self, interval: float) -> None:
        while not self._done.wait(interval):
            self._sample()

    def stop(self) -> PeakRss:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._sample()
        return self

    def text(self) -> str:
        """``"<ru_maxrss> MiB (ru_maxrss; anonymous peak <a> MiB, file-backed peak <f> MiB)"``."""
        if not self.peaks:
            return f"{peak_rss_mib():.0f} MiB (ru_maxrss)"
        return (f"{peak_rss_mib():.0f} MiB (ru_maxrss; anonymous peak {self.peaks['anon']:.0f} MiB, file-backed peak "
                f"{self.peaks['file']:.0f} MiB)")
