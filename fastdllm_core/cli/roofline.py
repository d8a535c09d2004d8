"""``fastdllm roofline --bench BENCH.csv --out ROOFLINE.csv [--bandwidth-gbs X | --measure-bandwidth]``: the
memory-bandwidth roofline (:mod:`fastdllm_core.bench.roofline`) of a throughput CSV's rows.

The roofline on two sides: this module is the command (argument parsing, CSV in and out);
:mod:`fastdllm_core.bench.roofline` computes it (same idea, same name)."""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    from ..bench import roofline

    p = argparse.ArgumentParser(prog="fastdllm roofline", description=roofline.__doc__.split("\n\n")[0])
    p.add_argument("--bench", required=True, help="a CSV written by `fastdllm bench`")
    p.add_argument("--out", required=True)
    p.add_argument("--model", default=None, help="model source for the byte count (default: the CSV's model column)")
    bw = p.add_mutually_exclusive_group()
    bw.add_argument("--bandwidth-gbs", type=float, default=None, help="memory bandwidth to compare against (GB/s)")
    bw.add_argument("--measure-bandwidth", action="store_true", help="measure a copy bandwidth on --device")
    p.add_argument("--device", default=None, help="device for --measure-bandwidth (default: the CSV's device)")
    p.add_argument("--modes", nargs="+", default=["ar", "bd"])
    p.add_argument("--batch-sizes", nargs="+", type=int, default=None, help="keep only these batch sizes")
    return p


def _rows(args, path: Path) -> tuple[list[dict], str]:
    """(the bench rows to bound, the model source); ValueError naming what is wrong."""
    if not path.is_file():
        raise ValueError(f"bench CSV not found: {path}")
    if args.bandwidth_gbs is not None and args.bandwidth_gbs <= 0:
        raise ValueError(f"--bandwidth-gbs must be positive, got {args.bandwidth_gbs}")
    with open(path) as f:
        rows = [r for r in csv.DictReader(f) if r["mode"] in args.modes]
    if args.batch_sizes:
        rows = [r for r in rows if int(r["batch_size"]) in args.batch_sizes]
    if not rows:
        raise ValueError(f"no rows of modes {args.modes} in {path}")
    sources = {r["model"] for r in rows}
    if args.model is None and len(sources) != 1:
        raise ValueError(f"the CSV holds several models {sorted(sources)}; pick one with --model")
    source = args.model or sources.pop()
    return [r for r in rows if r["model"] == source] or rows, source


def _bandwidth(args, device: str, spec: float | None) -> tuple[float, str]:
    """(GB/s, where it comes from): given, measured, or the vendor's specification."""
    from ..bench.roofline import measure_bandwidth

    if args.bandwidth_gbs is not None:
        return args.bandwidth_gbs, "given"
    if args.measure_bandwidth or spec is None:
        return (measure_bandwidth(device),
                "cuda_measured_d2d_copy" if device.startswith("cuda") else "cpu_measured_copy")
    return spec, "vendor_spec"


def main(argv: list[str] | None = None) -> int:
    from ..bench.roofline import dtype_bytes, model_for_traffic, roofline_rows, spec_bandwidth, weight_traffic
    from ..provenance import run_metadata, write_csv_atomic

    args = build_parser().parse_args(argv)
    path = Path(args.bench)
    try:
        rows, source = _rows(args, path)
    except ValueError as exc:
        print(f"roofline: error: {exc}", file=sys.stderr)
        return 2
    dtype = rows[0].get("dtype") or "float32"
    model = model_for_traffic(source, dtype)
    traffic = weight_traffic(model, dtype_bytes(dtype))
    device = args.device or rows[0].get("device") or "cpu"
    spec = spec_bandwidth(rows[0].get("device_name", "")) if rows[0].get("device_type") == "cuda" else None
    bw_gbs, source_bw = _bandwidth(args, device, spec)
    out = roofline_rows(rows, traffic, model.config, bw_gbs, source_bw, spec)
    meta = run_metadata(config={"bench": str(path), "model": source, "bandwidth_gbs": bw_gbs}, device=device)
    out = [{**r, **{f"roofline_{k}": v for k, v in meta.items()}} for r in out]
    write_csv_atomic(args.out, out)
    for r in out:
        if r["mode"] == "ar" and int(float(r["batch_size"])) == 1:
            print(f"AR {r['baseline']} batch 1: {float(r['tokens_per_s']):.1f} tok/s = "
                  f"{100 * r['fraction_of_roofline']:.1f}% of {r['roofline_tokens_per_s']:.1f} tok/s "
                  f"({source_bw} {bw_gbs:.1f} GB/s, {r['weight_bytes_per_forward'] / 1e6:.1f} MB/forward)")
    print(f"wrote {len(out)} rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
