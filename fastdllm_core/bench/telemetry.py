"""NVML telemetry for throughput measurements (on nvidia-ml-py's ``pynvml``).

:class:`NvmlSampler` is a context manager around a measured window::

    with NvmlSampler("cuda:0", hz=20) as s:
        run_the_benchmark()
    s.summary()  # energy_j, power_avg_w, power_peak_w, mem_used_peak_mib, gpu_util_avg, sm_clock_avg_mhz, ...

* A background thread samples power, memory used, GPU utilisation and SM clock at ``hz`` (>= 10) samples per
  second; one sample is also taken at the start and at the end of the window, so short windows have data.
* Energy is the delta of the GPU's total-energy counter (``nvmlDeviceGetTotalEnergyConsumption``, Volta and
  newer) over the window.  Only when the counter is unsupported is power integrated over the samples
  (trapezoids); ``energy_method`` then says ``power_integration`` so the two are never confused.
* The torch / CUDA device is mapped to its NVML index through the device UUID when torch can tell it, otherwise
  through ``CUDA_VISIBLE_DEVICES`` (integer indices or ``GPU-`` UUIDs / UUID prefixes).  NVML enumerates by PCI
  bus order, so integer indices are only trusted as NVML indices under ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` or when
  just one GPU is visible; otherwise the mapping is reported as ambiguous rather than guessed.
* Without NVML (no driver, no GPU, CPU runs) every field is ``"not available"``; nothing is invented.

The ``nvml`` argument takes any object with the ``pynvml`` function names, which is how the tests drive the
sampler with a fake NVML.
"""
from __future__ import annotations

import logging
import os
import threading
import time

from ..provenance import NOT_AVAILABLE

log = logging.getLogger(__name__)

SUMMARY_FIELDS = [
    "energy_j", "energy_method", "power_avg_w", "power_peak_w", "mem_used_peak_mib", "gpu_util_avg",
    "sm_clock_avg_mhz", "n_samples", "sample_hz", "window_s",
]
DEVICE_FIELDS = ["nvml_index", "nvml_uuid", "nvml_device_name", "nvml_driver", "nvml_cuda_driver", "nvml_mapping"]
NVML_CLOCK_SM = 1  # pynvml.NVML_CLOCK_SM


def not_available_summary() -> dict:
    return {k: NOT_AVAILABLE for k in SUMMARY_FIELDS + DEVICE_FIELDS}


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def load_nvml():
    """The ``pynvml`` module, initialised; ``None`` when NVML is missing or cannot start (no driver / GPU)."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - any NVML failure means "not available"
        log.info("NVML not available: %s", exc)
        return None
    return pynvml


# ------------------------------------------------------------------------------------------------ device mapping
def parse_visible_devices(value: str | None) -> list[str] | None:
    """``CUDA_VISIBLE_DEVICES`` as a list of entries (None when unset: every GPU visible in CUDA order).

    CUDA stops at the first invalid entry; so do we (an empty entry or ``-1`` ends the list).
    """
    if value is None:
        return None
    out = []
    for item in value.split(","):
        item = item.strip()
        if not item or item.startswith("-"):
            break
        out.append(item)
    return out


def _uuid_of(nvml, handle) -> str:
    return _text(nvml.nvmlDeviceGetUUID(handle))


def resolve_nvml_index(cuda_index: int = 0, *, nvml, env: dict | None = None,
                       torch_uuid: str | None = None) -> tuple[int, str]:
    """NVML index of the CUDA device ``cuda_index`` (as torch numbers it) and how it was found.

    Order of evidence: the device's UUID as torch reports it (exact); then the ``CUDA_VISIBLE_DEVICES`` entry
    (a ``GPU-`` UUID or prefix is exact; an integer is the NVML index when ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` or
    only one GPU exists); with ``CUDA_VISIBLE_DEVICES`` unset, the same rule for ``cuda_index`` itself.
    Raises ``ValueError`` naming the entry when the mapping is impossible or ambiguous.
    """
    env = os.environ if env is None else env
    if not isinstance(cuda_index, int) or cuda_index < 0:
        raise ValueError(f"cuda device index must be a non-negative integer, got {cuda_index!r}")
    count = int(nvml.nvmlDeviceGetCount())
    if torch_uuid:
        uuid = torch_uuid if torch_uuid.startswith(("GPU-", "MIG-")) else f"GPU-{torch_uuid}"
        for i in range(count):
            if _uuid_of(nvml, nvml.nvmlDeviceGetHandleByIndex(i)).lower() == uuid.lower():
                return i, "torch_uuid"
    visible = parse_visible_devices(env.get("CUDA_VISIBLE_DEVICES"))
    pci_order = env.get("CUDA_DEVICE_ORDER", "FASTEST_FIRST") == "PCI_BUS_ID"
    if visible is None:
        entry, how = str(cuda_index), "cuda_index"
    else:
        if cuda_index >= len(visible):
            raise ValueError(f"cuda:{cuda_index} is not visible: "
                             f"CUDA_VISIBLE_DEVICES={env.get('CUDA_VISIBLE_DEVICES')!r}")
        entry, how = visible[cuda_index], "CUDA_VISIBLE_DEVICES"
    if entry.upper().startswith("MIG-"):
        raise ValueError(f"CUDA_VISIBLE_DEVICES entry {entry!r} is a MIG instance: NVML power and energy are "
                         "per physical GPU and are not reported for MIG slices")
    if entry.upper().startswith("GPU-"):
        hits = [i for i in range(count) if _uuid_of(nvml, nvml.nvmlDeviceGetHandleByIndex(i)).lower()
                .startswith(entry.lower())]
        if len(hits) != 1:
            raise ValueError(f"CUDA_VISIBLE_DEVICES entry {entry!r} matches {len(hits)} NVML devices (need exactly 1)")
        return hits[0], f"{how}_uuid"
    try:
        idx = int(entry)
    except ValueError:
        raise ValueError(f"CUDA_VISIBLE_DEVICES entry {entry!r} is neither an index nor a GPU UUID") from None
    if not 0 <= idx < count:
        raise ValueError(f"device index {idx} (from {how}) is outside the {count} NVML devices")
    if count > 1 and not pci_order:
        raise ValueError(f"device index {idx} (from {how}) is ambiguous: CUDA orders GPUs fastest-first and NVML by "
                         "PCI bus; set CUDA_DEVICE_ORDER=PCI_BUS_ID or use GPU UUIDs")
    return idx, f"{how}_index"


def _torch_device_info(device) -> tuple[int, str | None]:
    """(CUDA index, UUID string or None) of a torch device spec; index 0 for ``None``/'cuda'."""
    import torch

    if isinstance(device, int):
        idx = device
    else:
        dev = torch.device(device if device is not None else "cuda")
        if dev.type != "cuda":
            raise ValueError(f"NVML telemetry needs a CUDA device, got {device!r}")
        idx = dev.index if dev.index is not None else (torch.cuda.current_device() if torch.cuda.is_available() else 0)
    uuid = None
    try:
        if torch.cuda.is_available():
            uuid = str(torch.cuda.get_device_properties(idx).uuid)
    except Exception:  # noqa: BLE001 - older torch without .uuid: fall back to CUDA_VISIBLE_DEVICES
        uuid = None
    return idx, uuid


# ------------------------------------------------------------------------------------------------ sampler
class NvmlSampler:
    """Background NVML sampler over a measured window (see the module docstring).

    ``device``: a torch device (``"cuda:1"``, ``torch.device``), a CUDA index (int, as torch numbers devices),
    ``None`` (current CUDA device) or ``"cpu"`` (always "not available").  ``nvml``: an initialised pynvml-like
    module (tests) or ``None`` to load the real one.  ``nvml_index`` bypasses the CUDA->NVML mapping.
    """

    def __init__(self, device=None, hz: float = 20.0, *, nvml=None, nvml_index: int | None = None,
                 env: dict | None = None, clock=time.perf_counter):
        if not isinstance(hz, (int, float)) or isinstance(hz, bool) or not (10 <= hz <= 1000):
            raise ValueError(f"sampling rate hz must be between 10 and 1000, got {hz!r}")
        self.hz = float(hz)
        self.clock = clock
        self.samples: list[tuple[float, float | None, float | None, float | None, float | None]] = []
        self.device_info = {k: NOT_AVAILABLE for k in DEVICE_FIELDS}
        self.reason = ""
        self._nvml = None
        self._handle = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._e0 = self._e1 = None
        self._t0 = self._t1 = None
        self._owns_nvml = False
        if device is not None and not isinstance(device, int) and str(device).startswith("cpu"):
            self.reason = "cpu device"
            return
        if nvml is None:
            nvml = load_nvml()
            self._owns_nvml = nvml is not None
            if nvml is None:
                self.reason = "NVML not available"
                return
        self._nvml = nvml
        try:
            if nvml_index is None:
                cuda_index, uuid = (device, None) if isinstance(device, int) else _torch_device_info(device)
                nvml_index, how = resolve_nvml_index(cuda_index, nvml=nvml, env=env, torch_uuid=uuid)
            else:
                how = "given"
            self._handle = nvml.nvmlDeviceGetHandleByIndex(nvml_index)
            self.device_info.update(nvml_index=nvml_index, nvml_mapping=how,
                                    nvml_uuid=_uuid_of(nvml, self._handle),
                                    nvml_device_name=_text(nvml.nvmlDeviceGetName(self._handle)))
            self.device_info["nvml_driver"] = self._safe(lambda: _text(nvml.nvmlSystemGetDriverVersion()))
            self.device_info["nvml_cuda_driver"] = self._safe(lambda: _cuda_version_text(
                nvml.nvmlSystemGetCudaDriverVersion()))
        except ValueError as exc:
            log.warning("NVML telemetry off: %s", exc)
            self.reason = str(exc)
            self._handle = None

    # -------------------------------------------------------------------------------- reading NVML
    @staticmethod
    def _safe(fn):
        try:
            return fn()
        except Exception:  # noqa: BLE001 - an unsupported NVML query is "not available" for that field
            return NOT_AVAILABLE

    def _read_energy_mj(self):
        try:
            return float(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))
        except Exception:  # noqa: BLE001 - counter unsupported (pre-Volta, some vGPUs)
            return None

    def _read(self):
        nv, h = self._nvml, self._handle

        def opt(fn):
            try:
                return float(fn())
            except Exception:  # noqa: BLE001 - one unsupported metric does not void the others
                return None

        return (self.clock(), opt(lambda: nv.nvmlDeviceGetPowerUsage(h) / 1000.0),
                opt(lambda: nv.nvmlDeviceGetMemoryInfo(h).used / 2 ** 20),
                opt(lambda: nv.nvmlDeviceGetUtilizationRates(h).gpu),
                opt(lambda: nv.nvmlDeviceGetClockInfo(h, NVML_CLOCK_SM)))

    def sample_once(self) -> None:
        s = self._read()
        with self._lock:
            self.samples.append(s)

    def _loop(self):
        period = 1.0 / self.hz
        nxt = self.clock() + period
        while not self._stop.wait(max(0.0, nxt - self.clock())):
            self.sample_once()
            nxt += period
            if nxt < self.clock():  # fell behind (a slow NVML call): do not burst to catch up
                nxt = self.clock() + period

    @property
    def available(self) -> bool:
        return self._handle is not None

    # -------------------------------------------------------------------------------- window
    def start(self) -> "NvmlSampler":
        if self._thread is not None:
            raise RuntimeError("NvmlSampler is already running")
        self.samples = []
        self._t0 = self.clock()
        if not self.available:
            return self
        self._e0 = self._read_energy_mj()
        self.sample_once()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="nvml-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._t1 = self.clock()
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        self.sample_once()
        self._e1 = self._read_energy_mj()

    def __enter__(self) -> "NvmlSampler":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def close(self) -> None:
        if self._owns_nvml and self._nvml is not None:
            self._safe(self._nvml.nvmlShutdown)
            self._owns_nvml = False

    # -------------------------------------------------------------------------------- results
    def summary(self) -> dict:
        """Statistics of the last window; every field "not available" without NVML or without samples."""
        out = not_available_summary()
        out.update(self.device_info)
        if not self.available or self._t1 is None:
            return out
        with self._lock:
            samples = list(self.samples)
        window = self._t1 - self._t0
        out.update(n_samples=len(samples), sample_hz=self.hz, window_s=window)
        t = [s[0] for s in samples]
        cols = list(zip(*samples)) if samples else [[]] * 5

        def valid(k):
            return [v for v in cols[k] if v is not None]

        power, mem, util, clk = valid(1), valid(2), valid(3), valid(4)
        if power:
            out.update(power_avg_w=_time_weighted_mean(t, cols[1]), power_peak_w=max(power))
        if mem:
            out["mem_used_peak_mib"] = max(mem)
        if util:
            out["gpu_util_avg"] = sum(util) / len(util)
        if clk:
            out["sm_clock_avg_mhz"] = sum(clk) / len(clk)
        if self._e0 is not None and self._e1 is not None and self._e1 >= self._e0:
            out.update(energy_j=(self._e1 - self._e0) / 1000.0, energy_method="energy_counter")
        elif len(power) >= 2:
            out.update(energy_j=_trapezoid(t, cols[1]), energy_method="power_integration")
        return out


def _cuda_version_text(v) -> str:
    v = int(v)
    return f"{v // 1000}.{(v % 1000) // 10}"


def _pairs(t, v):
    return [(a, b) for a, b in zip(t, v) if b is not None]


def _trapezoid(t, v) -> float:
    p = _pairs(t, v)
    return float(sum((t1 - t0) * (v0 + v1) / 2 for (t0, v0), (t1, v1) in zip(p, p[1:])))


def _time_weighted_mean(t, v) -> float:
    p = _pairs(t, v)
    span = p[-1][0] - p[0][0] if len(p) > 1 else 0.0
    if span <= 0:
        return float(sum(b for _, b in p) / len(p))
    return _trapezoid(t, v) / span


def per_token(summary: dict, tokens: int) -> dict:
    """``joules_per_token`` (energy / generated tokens) and the power columns for a results row."""
    e = summary.get("energy_j", NOT_AVAILABLE)
    jpt = e / tokens if isinstance(e, (int, float)) and tokens > 0 else NOT_AVAILABLE
    return {"power_avg_w": summary.get("power_avg_w", NOT_AVAILABLE),
            "power_peak_w": summary.get("power_peak_w", NOT_AVAILABLE), "energy_j": e,
            "energy_method": summary.get("energy_method", NOT_AVAILABLE), "joules_per_token": jpt,
            "nvml_mem_used_peak_mib": summary.get("mem_used_peak_mib", NOT_AVAILABLE),
            "gpu_util_avg": summary.get("gpu_util_avg", NOT_AVAILABLE),
            "sm_clock_avg_mhz": summary.get("sm_clock_avg_mhz", NOT_AVAILABLE),
            "nvml_samples": summary.get("n_samples", NOT_AVAILABLE),
            "nvml_index": summary.get("nvml_index", NOT_AVAILABLE),
            "nvml_device_name": summary.get("nvml_device_name", NOT_AVAILABLE),
            "nvml_driver": summary.get("nvml_driver", NOT_AVAILABLE),
            "nvml_cuda_driver": summary.get("nvml_cuda_driver", NOT_AVAILABLE)}
