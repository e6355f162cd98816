"""Deploy a registered diffusion denoiser as a served sampling pipeline in one command: convert it (ONNX on
CPU hosts; reused when the workspace already holds a verified conversion), then write the denoiser model and
the sampler model (Python backend; steps/seed/samples are request inputs) into a Triton model repository."""
import argparse
import sys
import warnings
from pathlib import Path

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.config import add_arguments, from_args  # noqa: E402
from deployment_toolkit.config.keyvalue import VALUE_RULE, parse_pairs  # noqa: E402
from deployment_toolkit.diffusion.pipeline import PIPELINE_NAME, DenoiserSource, PipelineOptions  # noqa: E402
from deployment_toolkit.errors import UserInputError  # noqa: E402
from deployment_toolkit.export import ConvertOptions  # noqa: E402
from deployment_toolkit.repository.config import ConfigOptions  # noqa: E402
from deployment_toolkit.spec import FORMATS  # noqa: E402

DENOISER_CONFIG = ("instance_kind", "intra_op_threads", "max_queue_delay_us")  # the denoiser's, as config's flags


def _parser() -> argparse.ArgumentParser:
    p = cli.parser(__doc__, """
        deployment-toolkit deploy-diffusion --model sd_unet --preset small --model-repository model_repository \\
            --name sd_pipeline --sampler ddim --max-samples 4
        # then: python -m deployment_toolkit serve --model-repository model_repository
        #       deployment-toolkit diffusion-latency --model-repository model_repository --model-name sd_pipeline
    """)
    add_arguments(p, DenoiserSource, only=("model",))
    add_arguments(p, ConvertOptions, only=("preset",))
    p.add_argument("--model-repository", required=True)
    p.add_argument("--name", default=PIPELINE_NAME, help="sampler model name; the denoiser is <name>_denoiser")
    add_arguments(p, PipelineOptions)  # --sampler, --max-samples, --max-conditionings, --max-steps, --runtime, ...
    p.add_argument("--sampler-option", action="append", default=[], metavar="KEY=VALUE",
                   help=f"sampler keyword (e.g. eta=0.5, spacing=leading); repeatable; {VALUE_RULE}")
    p.add_argument("--format", default="auto", choices=("auto", *FORMATS),
                   help="denoiser artifact; auto: onnx on CPU hosts (ONNX Runtime in the Python backend); on GPU "
                        "hosts trt where TensorRT imports, else ts-trace (TorchScript on CUDA)")
    d = p.add_argument_group("denoiser model", "the converted denoiser's batch size and its config.pbtxt")
    add_arguments(d, ConvertOptions, only=("max_batch_size",))
    add_arguments(d, ConfigOptions, only=DENOISER_CONFIG)
    add_arguments(p, DenoiserSource, only=("workspace",))
    p.add_argument("--force-convert", action="store_true", help="convert even if the workspace has the artifact")
    add_arguments(p, ConvertOptions, only=("precision", "verify"))  # --precision, --no-verify
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)

    from deployment_toolkit.repository import HostMismatchWarning
    from deployment_toolkit.diffusion.pipeline import write_diffusion_pipeline

    fmt = auto_format() if args.format == "auto" else args.format
    artifact_dir = from_args(DenoiserSource, args).artifact_dir(args.preset, fmt, args.precision)
    convert_if_needed(args, fmt, artifact_dir)
    options = parse_pairs(args.sampler_option, "--sampler-option")
    denoiser_opts = ConfigOptions(model_name="denoiser", max_batch_size=args.max_batch_size,
                                  **{name: getattr(args, name) for name in DENOISER_CONFIG})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", HostMismatchWarning)
        paths = write_diffusion_pipeline(args.model_repository, artifact_dir, args.name, from_args(
            PipelineOptions, args, sampler_options=options, denoiser_options=denoiser_opts))
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    s = paths.settings
    print(f"wrote denoiser {paths.denoiser_dir} (max batch {s.denoiser_max_batch}) and sampler {paths.sampler_dir} "
          f"({s.sampler}, samples <= {s.max_samples}, latents {list(s.sample_shape)}, conditioning [B,"
          f"{','.join(map(str, s.cond_shape))}])")
    return 0


def auto_format() -> str:
    from deployment_toolkit.repository.config import host_has_gpu

    if not host_has_gpu():
        return "onnx"
    try:
        import tensorrt  # noqa: F401
    except ImportError:
        return "ts-trace"
    return "trt"


def convert_if_needed(args, fmt: str, artifact_dir: Path) -> None:
    from deployment_toolkit.export import VerificationError, convert
    from deployment_toolkit.export.reuse import reusable_artifact
    from deployment_toolkit.sources import resolve

    if not args.force_convert:
        reuse = reusable_artifact(artifact_dir, resolve(args.model, preset=args.preset), fmt, args.preset,
                                  precision=args.precision, min_max_batch_size=args.max_batch_size,
                                  require_verified=args.verify)
        print(reuse.reason)
        if reuse:
            return
    print(f"converting {args.model} ({args.preset}) to {fmt} in {artifact_dir} ...", flush=True)
    # --preset, --precision, --max-batch-size, --no-verify; a full-size denoiser is verified at batch 1 only
    opts = from_args(ConvertOptions, args, **({} if args.preset == "small" else {"verify_batch_sizes": (1,)}))
    try:
        m = convert(args.model, fmt, artifact_dir, opts)
    except VerificationError as err:
        raise UserInputError(f"{err} (see {artifact_dir / 'manifest.json'})") from err
    print(f"converted in {m.export_options['export_seconds']:.1f} s"
          + (f", verified: max abs err {m.verification['max_abs_err']:.3g}" if m.verification else ""))


if __name__ == "__main__":
    cli.run(main)
