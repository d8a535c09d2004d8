"""NVML sampler logic, driven by a fake NVML (no GPU needed)."""
from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from fastdllm_core.bench import telemetry
from fastdllm_core.bench.telemetry import NvmlSampler, parse_visible_devices, resolve_nvml_index
from fastdllm_core.provenance import NOT_AVAILABLE


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class FakeNvml:
    """Enough of pynvml for the sampler: two GPUs; GPU 1 draws power that the test script controls."""

    def __init__(self, uuids=("GPU-aaaa-0000", "GPU-bbbb-1111"), energy=True, power_w=300.0):
        self.uuids = list(uuids)
        self.energy_supported = energy
        self.energy_mj = 5_000_000.0
        self.power_w = power_w
        self.mem_bytes = 10 * 2 ** 30
        self.util = 80
        self.clock_mhz = 1980
        self.calls = {"power": 0}

    def nvmlDeviceGetCount(self):
        return len(self.uuids)

    def nvmlDeviceGetHandleByIndex(self, i):
        if not 0 <= i < len(self.uuids):
            raise RuntimeError("bad index")
        return ("h", i)

    def nvmlDeviceGetUUID(self, h):
        return self.uuids[h[1]].encode()

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H100 80GB HBM3"

    def nvmlSystemGetDriverVersion(self):
        return "550.54.15"

    def nvmlSystemGetCudaDriverVersion(self):
        return 12040

    def nvmlDeviceGetPowerUsage(self, h):
        self.calls["power"] += 1
        return int(self.power_w * 1000)

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        if not self.energy_supported:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return self.energy_mj

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(used=self.mem_bytes, total=80 * 2 ** 30)

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=self.util, memory=50)

    def nvmlDeviceGetClockInfo(self, h, kind):
        assert kind == telemetry.NVML_CLOCK_SM
        return self.clock_mhz


def test_parse_visible_devices():
    assert parse_visible_devices(None) is None
    assert parse_visible_devices("1,0") == ["1", "0"]
    assert parse_visible_devices(" GPU-ab , 2") == ["GPU-ab", "2"]
    assert parse_visible_devices("0,-1,1") == ["0"]  # CUDA stops at the first invalid entry
    assert parse_visible_devices("") == []


def test_mapping_cuda_visible_devices_index_and_uuid():
    nv = FakeNvml()
    pci = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert resolve_nvml_index(0, nvml=nv, env={**pci, "CUDA_VISIBLE_DEVICES": "1"}) == (1, "CUDA_VISIBLE_DEVICES_index")
    assert resolve_nvml_index(1, nvml=nv, env={**pci, "CUDA_VISIBLE_DEVICES": "1,0"})[0] == 0
    assert resolve_nvml_index(0, nvml=nv, env={"CUDA_VISIBLE_DEVICES": "GPU-bbbb"}) == (1, "CUDA_VISIBLE_DEVICES_uuid")
    assert resolve_nvml_index(1, nvml=nv, env={**pci}) == (1, "cuda_index_index")
    # torch's UUID (without the GPU- prefix) wins over everything else
    assert (resolve_nvml_index(0, nvml=nv, env={"CUDA_VISIBLE_DEVICES": "0"}, torch_uuid="bbbb-1111")
            == (1, "torch_uuid"))


def test_mapping_errors_name_the_entry():
    nv = FakeNvml()
    with pytest.raises(ValueError, match="ambiguous"):  # 2 GPUs, fastest-first order: an index proves nothing
        resolve_nvml_index(0, nvml=nv, env={"CUDA_VISIBLE_DEVICES": "1"})
    with pytest.raises(ValueError, match="'GPU-zz'"):
        resolve_nvml_index(0, nvml=nv, env={"CUDA_VISIBLE_DEVICES": "GPU-zz"})
    with pytest.raises(ValueError, match="MIG"):
        resolve_nvml_index(0, nvml=nv, env={"CUDA_VISIBLE_DEVICES": "MIG-1234"})
    with pytest.raises(ValueError, match="not visible"):
        resolve_nvml_index(2, nvml=nv, env={"CUDA_VISIBLE_DEVICES": "0,1"})
    with pytest.raises(ValueError, match="'abc'"):
        resolve_nvml_index(0, nvml=nv, env={"CUDA_VISIBLE_DEVICES": "abc"})
    single = FakeNvml(uuids=["GPU-only"])
    assert resolve_nvml_index(0, nvml=single, env={}) == (0, "cuda_index_index")  # one GPU: no ambiguity


def test_sampler_energy_counter_and_stats_with_fake_clock():
    nv, clock = FakeNvml(), FakeClock()
    s = NvmlSampler(0, hz=20, nvml=nv, env={"CUDA_VISIBLE_DEVICES": "GPU-bbbb"}, clock=clock)
    assert s.available and s.device_info["nvml_index"] == 1
    s._t0 = clock.t
    s._e0 = s._read_energy_mj()  # drive the window by hand: deterministic samples at known times
    for t, p in [(0.0, 100.0), (1.0, 300.0), (2.0, 300.0)]:
        clock.t, nv.power_w = t, p
        s.sample_once()
    nv.mem_bytes = 20 * 2 ** 30
    clock.t = 3.0
    nv.power_w = 100.0
    s.sample_once()
    nv.energy_mj += 123_456.0
    s._e1, s._t1 = s._read_energy_mj(), clock.t
    out = s.summary()
    assert out["energy_method"] == "energy_counter"
    assert out["energy_j"] == pytest.approx(123.456)  # the counter delta, not the power integral (700 J)
    assert out["power_peak_w"] == 300.0
    assert out["power_avg_w"] == pytest.approx(700.0 / 3.0)  # time-weighted: trapezoids / span
    assert out["mem_used_peak_mib"] == pytest.approx(20 * 1024)
    assert out["gpu_util_avg"] == 80 and out["sm_clock_avg_mhz"] == 1980
    assert out["n_samples"] == 4 and out["window_s"] == 3.0
    assert out["nvml_device_name"].startswith("NVIDIA H100") and out["nvml_cuda_driver"] == "12.4"


def test_sampler_falls_back_to_power_integration_and_flags_it():
    nv, clock = FakeNvml(energy=False), FakeClock()
    s = NvmlSampler(nvml=nv, nvml_index=0, hz=10, clock=clock)
    s._t0 = 0.0
    s._e0 = s._read_energy_mj()
    assert s._e0 is None
    for t, p in [(0.0, 200.0), (0.5, 200.0), (2.0, 400.0)]:
        clock.t, nv.power_w = t, p
        s.sample_once()
    s._t1 = 2.0
    out = s.summary()
    assert out["energy_method"] == "power_integration"
    assert out["energy_j"] == pytest.approx(0.5 * 200 + 1.5 * 300)


def test_background_thread_samples_at_least_10_hz():
    nv = FakeNvml()
    s = NvmlSampler(nvml=nv, nvml_index=1, hz=50)
    with s:
        time.sleep(0.3)
        nv.energy_mj += 1000.0
    out = s.summary()
    # 0.3 s at 50 Hz ~ 15 samples plus start/end ones; allow for a loaded CI machine but demand >= 10 Hz
    assert out["n_samples"] >= 0.3 * 10 + 2
    assert out["energy_j"] == pytest.approx(1.0)
    assert s._thread is None


def test_no_nvml_means_not_available_everywhere(monkeypatch):
    monkeypatch.setattr(telemetry, "load_nvml", lambda: None)
    s = NvmlSampler("cuda:0")
    with s:
        pass
    out = s.summary()
    assert set(out) == set(telemetry.SUMMARY_FIELDS + telemetry.DEVICE_FIELDS)
    assert all(v == NOT_AVAILABLE for v in out.values())
    cpu = NvmlSampler("cpu")
    with cpu:
        pass
    assert all(v == NOT_AVAILABLE for v in cpu.summary().values())
    row = telemetry.per_token(out, 100)
    assert row["joules_per_token"] == NOT_AVAILABLE and row["power_avg_w"] == NOT_AVAILABLE


def test_per_token_and_bad_rate():
    row = telemetry.per_token({"energy_j": 50.0, "power_avg_w": 10.0}, 200)
    assert row["joules_per_token"] == 0.25
    with pytest.raises(ValueError, match="hz"):
        NvmlSampler("cpu", hz=5)


def test_unsupported_metric_is_not_available_not_zero():
    nv, clock = FakeNvml(), FakeClock()

    def broken(h, kind):
        raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")

    nv.nvmlDeviceGetClockInfo = broken
    s = NvmlSampler(nvml=nv, nvml_index=0, clock=clock)
    s._t0 = 0.0
    for t in (0.0, 1.0):
        clock.t = t
        s.sample_once()
    s._t1 = 1.0
    out = s.summary()
    assert out["sm_clock_avg_mhz"] == NOT_AVAILABLE
    assert out["power_avg_w"] == 300.0
