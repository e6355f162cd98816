"""Does the user-model path cost conversion time? Convert the zoo's model and the same architecture named by
its timm arch (`timm:<arch>`, through the model-source resolver) side by side in one run, at the same preset
size, alternating which goes first each round, and print the median wall time of each and their ratio.

Each timed call is the whole convert(): resolve the source, build the model, export, verify, write the manifest."""
import argparse
import sys
from pathlib import Path

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.config import add_arguments, from_args  # noqa: E402
from deployment_toolkit.errors import UserInputError  # noqa: E402
from deployment_toolkit.spec import FORMATS  # noqa: E402


def _parser() -> argparse.ArgumentParser:
    p = cli.parser(__doc__, """
        deployment-toolkit-lab bench-sources --zoo-model resnet50 --timm-arch resnet50 --preset full \\
            --output-type onnx --repeats 3 --json results/sources-speed/run.json
    """)
    from deployment_toolkit.export import ConvertOptions

    p.add_argument("--zoo-model", default="resnet50", help="zoo name (default: resnet50)")
    p.add_argument("--timm-arch", default=None, help="timm architecture (default: the zoo model's name)")
    add_arguments(p, ConvertOptions, only=("preset",))  # both sides use it
    p.add_argument("--output-type", choices=FORMATS, default="onnx")
    p.add_argument("--repeats", type=int, default=3, help="conversions per side (default 3)")
    add_arguments(p, ConvertOptions, only=("verify",))  # --no-verify: time the export only
    p.add_argument("--workdir", default=None, help="keep the artifacts here (default: a temporary folder)")
    p.add_argument("--json", default=None, help="also write the timings and the run's metadata to this file")
    add_arguments(p, ConvertOptions, only=("seed",))
    return p


def main(argv: list[str] | None = None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error("--repeats must be >= 1")

    import json
    import statistics
    import tempfile
    import time

    from deployment_toolkit.export import ConvertOptions, convert
    from deployment_toolkit.sources import resolve
    from deployment_toolkit.spec import atomic_write_text

    sides = {"zoo": args.zoo_model, "timm": f"timm:{args.timm_arch or args.zoo_model}"}
    shapes = {k: resolve(ref, preset=args.preset).signature.to_dict() for k, ref in sides.items()}
    if shapes["zoo"] != shapes["timm"]:
        raise UserInputError(f"{sides['zoo']} and {sides['timm']} ({args.preset}) have different signatures: "
                         f"{shapes['zoo']} vs {shapes['timm']}; pick the same architecture or pass --preset")
    opts = from_args(ConvertOptions, args)  # --preset, --no-verify, --seed
    seconds: dict[str, list[float]] = {k: [] for k in sides}
    with tempfile.TemporaryDirectory(prefix="sources-speed-") as tmp:
        work = Path(args.workdir or tmp)
        for i in range(args.repeats):
            order = list(sides) if i % 2 == 0 else list(reversed(sides))
            for side in order:
                t0 = time.perf_counter()
                convert(sides[side], args.output_type, work / side / args.output_type, opts)
                seconds[side].append(time.perf_counter() - t0)
                print(f"round {i + 1}: {sides[side]} converted in {seconds[side][-1]:.2f} s", flush=True)
    med = {k: statistics.median(v) for k, v in seconds.items()}
    ratio = med["timm"] / med["zoo"]
    print(f"{args.output_type} ({args.preset}), median of {args.repeats}: {sides['zoo']} {med['zoo']:.2f} s, "
          f"{sides['timm']} {med['timm']:.2f} s, timm/zoo time ratio {ratio:.3f}")
    if args.json:
        from deployment_toolkit.results import runinfo

        record = {"sides": sides, "preset": args.preset, "format": args.output_type, "verify": opts.verify,
                  "seconds": seconds, "median_s": med, "ratio_timm_over_zoo": ratio,
                  "run": runinfo.run_metadata(vars(args))}
        atomic_write_text(args.json, json.dumps(record, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    cli.run(main)
