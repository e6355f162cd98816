"""The models people bring, end to end: a corpus of real architectures from transformers, torchvision, timm and
torch (random weights, nothing downloaded), each named as a user names a model and given its data as a user's
folder, converted to ONNX / TorchScript trace / TorchScript script, served on the real tritonserver, checked
against the framework on its samples and measured at one online point. The table says how far each one gets
and why it stops there; a second table times the ONNX conversion with the exporter fallback on and off for a
model that exports on the first try (the fallback must cost nothing when it is not needed)."""
import argparse
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.results.run_folder import add_result_path_argument  # noqa: E402
from deployment_toolkit.committed import refuse_committed  # noqa: E402

if TYPE_CHECKING:  # pragma: no cover
    from ..corpus.run import CorpusSettings


def _parser() -> argparse.ArgumentParser:
    p = cli.parser(__doc__, """
        deployment-toolkit-lab bench-corpus --result-path results/corpus-cpu
        deployment-toolkit-lab bench-corpus --models hf-bert-seqcls,tv-resnet18 --no-serve --result-path /tmp/corpus
    """)
    from ..corpus.run import CorpusSettings
    from ..corpus.speed import FALLBACK_REPEATS

    # the defaults are CorpusSettings' and fallback_cost's, written once there (corpus may not import config, so
    # these flags are declared here, not built from the fields)
    p.add_argument("--models", default=None, help="comma-separated corpus names (default: all; --list shows them)")
    p.add_argument("--list", action="store_true", help="list the corpus and exit")
    p.add_argument("--formats", default=",".join(CorpusSettings.formats),
                   help="formats to convert to, in order of preference for serving (default %(default)s)")
    p.add_argument("--no-serve", action="store_true", help="convert and verify only")
    p.add_argument("--perf-window-ms", type=int, default=CorpusSettings.perf_window_ms,
                   help="perf_analyzer window (default %(default)s)")
    p.add_argument("--export-timeout", type=float, default=CorpusSettings.timeout_s,
                   help="seconds per exporter attempt")
    p.add_argument("--fallback-repeats", type=int, default=FALLBACK_REPEATS,
                   help="conversions per side of the fallback-cost comparison (0: skip it; default %(default)s)")
    p.add_argument("--workdir", default=None,
                   help="keep the artifacts, repository, data and logs here (default: a temporary folder, removed)")
    add_result_path_argument(p, "--output", dest="output",
                   help="results folder (default: a new results/local/corpus-<UTC time>, git-ignored); must not "
                        "hold a corpus run already")
    return p


def settings_from_args(args: argparse.Namespace, formats: list[str]) -> "CorpusSettings":
    """The corpus run's settings from the parsed flags (`formats`: --formats, split and checked)."""
    from ..corpus.run import CorpusSettings

    return CorpusSettings(formats=tuple(formats), serve=not args.no_serve, perf_window_ms=args.perf_window_ms,
                          timeout_s=args.export_timeout if args.export_timeout > 0 else None)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)

    from ..corpus.architectures import ARCHITECTURES
    from ..corpus.report import write_report
    from ..corpus.run import FORMATS, run_corpus
    from ..corpus.speed import fallback_cost
    from deployment_toolkit.errors import UserInputError

    if args.list:
        for name, arch in ARCHITECTURES.items():
            print(f"{name:28s} {arch.library:13s} {arch.kind}")
        return 0
    names = [n.strip() for n in (args.models or ",".join(ARCHITECTURES)).split(",") if n.strip()]
    unknown = [n for n in names if n not in ARCHITECTURES]
    if unknown:
        raise UserInputError(f"unknown corpus model(s) {', '.join(unknown)}: see --list")
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    if not formats or any(f not in FORMATS for f in formats):
        raise UserInputError(f"--formats takes some of {', '.join(FORMATS)}, got {args.formats!r}")
    out = Path(args.output) if args.output else Path("results") / "local" / f"corpus-{_utc()}"
    refuse_committed(out, "--result-path")
    if (out / "corpus.csv").exists():
        raise UserInputError(f"{out} holds a corpus run already: pass another --result-path")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="corpus-") as tmp:
        work = Path(args.workdir) if args.workdir else Path(tmp)
        rows = run_corpus(names, work, settings_from_args(args, formats))
        speed = fallback_cost(work / "fallback-cost", args.fallback_repeats) if args.fallback_repeats > 0 else None
    report = write_report(out, rows, speed, vars(args))
    print(report.read_text())
    print(f"wrote {out / 'corpus.csv'}, {report} and {out / 'run.json'}")
    return 0


def _utc() -> str:
    import datetime as dt

    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


if __name__ == "__main__":
    cli.run(main)
