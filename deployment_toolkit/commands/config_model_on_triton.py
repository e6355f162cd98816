"""Write a converted model into a Triton model repository (config.pbtxt + version directory), validated
against Triton's ModelConfig schema, and optionally load it on a running server."""
import sys
import warnings
from pathlib import Path

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.errors import UserInputError  # noqa: E402
from deployment_toolkit.config import add_arguments, from_args  # noqa: E402
from deployment_toolkit.repository.config import MODEL_FORMATS, ConfigOptions  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = cli.parser(__doc__, """
        deployment-toolkit config --model-repository model_repository \\
            --model-path workspace/resnet50/onnx --model-format python --model-name resnet50 \\
            --max-batch-size 8 --preferred-batch-sizes 4,8 --max-queue-delay-us 100 \\
            --number-of-model-instances 1 --load-model none
    """)
    p.add_argument("--model-repository", required=True)
    p.add_argument("--model-path", required=True, help="directory written by convert_model.py (artifact + manifest.json)")
    p.add_argument("--model-format", choices=MODEL_FORMATS, default="python",
                   help="python: the Python backend runs the artifact (embedded server, any host); "
                        "ts-trace/ts-script/onnx/trt: Triton's native backend for that format (NGC container)")
    p.add_argument("--model-version", type=int, default=1)
    p.add_argument("--hardlink", action="store_true",
                   help="hard-link the artifact files instead of copying them (saves space for multi-GB weights); "
                        "both the workspace's and the repository's names become read-only. Default: the repository "
                        "gets its own copy (a reflink where the filesystem offers it)")
    add_arguments(p, ConfigOptions)  # --model-name, --max-batch-size, --number-of-model-instances, ... (ConfigOptions)
    p.add_argument("--load-model", choices=("none", "poll", "explicit"), default="none",
                   help="explicit: load through the repository API of --server-url; poll: wait until the "
                        "server (started with --model-control-mode poll) has it ready")
    p.add_argument("--server-url", default="127.0.0.1:8000", help="HTTP endpoint for --load-model")
    p.add_argument("--load-model-timeout-s", type=float, default=120.0)
    args = p.parse_args(argv)

    from deployment_toolkit.repository import write_model
    from deployment_toolkit.server.loading import load_on_server

    native = args.model_format != "python"
    opts = from_args(ConfigOptions, args, runtime="native" if native else "python")
    if native:
        from deployment_toolkit.spec import Manifest

        fmt = Manifest.load(args.model_path).format
        if fmt != args.model_format:
            raise UserInputError(f"--model-format {args.model_format} contradicts the artifact in {args.model_path}, "
                             f"which is {fmt}: convert it to {args.model_format} or pass --model-format {fmt}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # host mismatch, batching left out: shown, not fatal
        model_dir = write_model(args.model_repository, args.model_path, opts, version=args.model_version,
                                hardlink=args.hardlink)
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    print(f"wrote {model_dir / 'config.pbtxt'} and {model_dir / str(args.model_version)}/")
    if args.load_model != "none":
        load_on_server(args.server_url, args.model_name, args.load_model, timeout_s=args.load_model_timeout_s)
        print(f"model {args.model_name} is ready on {args.server_url}")
    return 0


if __name__ == "__main__":
    cli.run(main)
