"""A sweep of perf_analyzer points against a live server, resumable and safe to interrupt.

- Each finished point is saved at once: the whole `<kind>.csv` is rewritten through a temp file and a
  rename, so the file never holds a repeated header or half a row, whatever kills the process.
- A rerun of the same command skips the points already in the CSV ("skipping N completed points").
- Each row records when it was measured and under which identity (runs.identity: host, server version, the
  config the server loaded, artifact digest, perf options, input data, toolkit version). A rerun reuses only the
  rows of the same identity; rows of another are moved aside (never deleted) with one line saying what differs.
- Before each point the server is health-checked; if it died, the sweep stops with the server's log
  tail (or perf_analyzer's output), keeps what was measured and can be resumed by running it again.
"""
from __future__ import annotations

import csv
import io
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import numpy as np

from ..runinfo import read_run_json
from ..runs.identity import (RunIdentity, artifact_digest, host_identity, input_data_digest, library_versions,
                             served_config, toolkit_version)
from ..runs.ledger import (IDENTITY_COLUMN, MEASURED_AT_COLUMN, PROVENANCE_COLUMNS, IdentityMismatch,
                           add_reuse_arguments, ensure_registered, now_utc, reconcile, record_run)
from ..spec import ModelSignature, SpecError, TensorSpec, atomic_write_text, numpy_dtype
from .analyzer import (
    MEASURE_COLUMNS,
    HasSignature,
    PerfAnalyzerError,
    PerfOptions,
    PointResult,
    build_command,
    check_perf_analyzer,
    needs_input_file,
    run_point,
    write_input_data_json,
)
from ..errors import UserError, UserInputError

if TYPE_CHECKING:  # pragma: no cover
    from ..server.local import LocalTritonServer

KEY_COLUMNS = ("Client Batch Size", "Concurrent client requests")
STORE_COLUMNS = (
    "Precision",
    *KEY_COLUMNS,
    *MEASURE_COLUMNS,
    "Triton Instances",
    "stable",
    "residual_clamped",
    "attempts",
    "window",
    "note",
    *PROVENANCE_COLUMNS,
)
_INT_COLUMNS = {"Client Batch Size", "Concurrent client requests", "Triton Instances", "attempts"}
_BOOL_COLUMNS = {"stable", "residual_clamped"}


class SweepError(UserError, RuntimeError):
    """A sweep could not go on; completed points are kept and a rerun resumes."""


class ServerDiedError(SweepError):
    pass


class ServerNotReady(SweepError):
    pass


@dataclass(frozen=True, order=True)
class SweepPoint:
    batch_size: int
    concurrency: int

    @property
    def key(self) -> tuple[int, int]:
        return (self.batch_size, self.concurrency)

    @property
    def name(self) -> str:
        return f"b{self.batch_size}_c{self.concurrency}"


# ---- results store -----------------------------------------------------------------------------

def sweep_identity(model_config: dict[str, Any], server_version: str | None, manifest_path: str | Path | None,
                   options: PerfOptions, input_data: str | Path | None) -> RunIdentity:
    """What defines a sweep's numbers (runs.identity). The server URL is left out: a restarted server may get new
    ports; the points are not in it either: a sweep extended by new points reuses the ones it has."""
    return RunIdentity(
        host=host_identity(),
        server_version=server_version,
        model_config=served_config(model_config),
        artifact_digest=artifact_digest(manifest_path),
        perf_options=options.measurement_fields(),
        input_data=input_data_digest(input_data if input_data is not None else options.input_data),
        toolkit_version=toolkit_version(),
        libraries=library_versions(),
    )


class ResultsStore:
    """`<run_dir>/<kind>.csv` (ms, seed columns, and each row's `measured_at` and `identity`).

    Opening it reuses the rows measured under `identity` and sets the others aside (runs.ledger.reconcile).
    """

    def __init__(self, run_dir: str | Path, kind: str, identity: RunIdentity, policy: str = "auto"):
        self.run_dir = Path(run_dir)
        self.kind = kind
        self.identity = identity
        self.policy = policy
        self.csv_path = self.run_dir / f"{kind}.csv"
        self._rows: dict[tuple[int, int], dict[str, Any]] = {}
        self._registered = False

    def open(self) -> "ResultsStore":
        """Load the rows that may be reused; nothing is created until the first point is added."""
        stored = read_store_csv(self.csv_path) if self.csv_path.exists() else []
        aside = [self.csv_path, self.run_dir / f"{self.kind}.md", self.run_dir / f"{self.kind}.fingerprint.json"]
        for row in reconcile(self.run_dir, self.kind, stored, self.identity, self.policy, aside):
            self._rows[(int(row["Client Batch Size"]), int(row["Concurrent client requests"]))] = row
        return self

    def completed(self, include_unstable: bool = True) -> set[tuple[int, int]]:
        return {k for k, r in self._rows.items() if include_unstable or r.get("stable", True)}

    def add(self, row: dict[str, Any]) -> None:
        if not self._registered:
            ensure_registered(self.run_dir, self.identity)
            self._registered = True
        key = (int(row["Client Batch Size"]), int(row["Concurrent client requests"]))
        row = {**row, MEASURED_AT_COLUMN: now_utc(), IDENTITY_COLUMN: self.identity.id}
        self._rows[key] = {c: row.get(c) for c in STORE_COLUMNS}
        self._write()

    def rows(self) -> list[dict[str, Any]]:
        return [self._rows[k] for k in sorted(self._rows)]

    def _write(self) -> None:
        atomic_write_text(self.csv_path, rows_to_csv(self.rows()))


def rows_to_csv(rows: Iterable[dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(STORE_COLUMNS), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: _fmt(row.get(c)) for c in STORE_COLUMNS})
    return buf.getvalue()


def _fmt(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.6g}" if abs(value) >= 1e-3 or value == 0 else f"{value:.3e}"
    return value


def read_store_csv(path: str | Path) -> list[dict[str, Any]]:
    """Rows of an online/offline CSV with typed values (ints, floats in ms, bools)."""
    rows = []
    with open(path, newline="") as fh:
        for raw in csv.DictReader(fh):
            if raw.get("Client Batch Size") in (None, "", "Client Batch Size"):
                continue
            row: dict[str, Any] = {}
            for col in STORE_COLUMNS:
                val = raw.get(col, "")
                if col in _INT_COLUMNS:
                    row[col] = int(float(val)) if val not in ("", None) else None
                elif col in _BOOL_COLUMNS:
                    row[col] = str(val).strip().lower() in ("true", "1", "yes")
                elif col in MEASURE_COLUMNS:
                    row[col] = float(val) if val not in ("", None) else math.nan
                else:
                    row[col] = val or ""
            rows.append(row)
    return rows


# ---- talking to the server ---------------------------------------------------------------------

def _client(url: str, protocol: str):
    if protocol == "grpc":
        import tritonclient.grpc as grpcclient

        return grpcclient.InferenceServerClient(url=url)
    import tritonclient.http as httpclient

    return httpclient.InferenceServerClient(url=url, connection_timeout=10.0, network_timeout=60.0)


def _close(client) -> None:
    try:
        client.close()
    except Exception:  # noqa: BLE001 - closing a dead connection must not hide the real error
        pass


def health_reason(url: str, protocol: str, model: str, version: str = "") -> str | None:
    """None when the server is live and the model ready, else why not (a health check, not a sleep)."""
    client = None
    try:
        client = _client(url, protocol)
        kw = {"client_timeout": 5.0} if protocol == "grpc" else {}
        if not client.is_server_live(**kw):
            return f"server at {url} is not live"
        if not client.is_model_ready(model, version, **kw):
            return f"model {model!r} is not ready on {url}"
        return None
    except Exception as err:  # noqa: BLE001 - any failure to answer is the answer
        return f"server at {url} ({protocol}) does not answer: {str(err).strip() or type(err).__name__}"
    finally:
        if client is not None:
            _close(client)


def fetch_model_config(url: str, protocol: str, model: str, version: str = "") -> dict[str, Any]:
    """The model's config as Triton sees it (HTTP: GET /v2/models/NAME/config)."""
    client = _client(url, protocol)
    try:
        if protocol == "grpc":
            return client.get_model_config(model, version, as_json=True).get("config", {})
        return client.get_model_config(model, version)
    finally:
        _close(client)


def fetch_model_metadata(url: str, protocol: str, model: str, version: str = "") -> dict[str, Any]:
    """GET /v2/models/NAME: input/output names, datatypes, shapes (gRPC's JSON has int64 as strings)."""
    client = _client(url, protocol)
    try:
        meta = client.get_model_metadata(model, version, as_json=True) if protocol == "grpc" else \
            client.get_model_metadata(model, version)
    finally:
        _close(client)
    for group in ("inputs", "outputs"):
        for tensor in meta.get(group, []):
            tensor["shape"] = [int(d) for d in tensor.get("shape", [])]
    return meta


def fetch_server_version(url: str, protocol: str) -> str | None:
    client = _client(url, protocol)
    try:
        meta = client.get_server_metadata(as_json=True) if protocol == "grpc" else client.get_server_metadata()
        return meta.get("version")
    except Exception:  # noqa: BLE001 - the version is informative only
        return None
    finally:
        _close(client)


def instance_count(model_config: dict[str, Any]) -> int:
    """Model instances from the config's instance_group (Triton's default is one per group)."""
    groups = model_config.get("instance_group") or []
    return sum(int(g.get("count", 1) or 1) for g in groups) or 1


def signature_from_metadata(metadata: dict[str, Any], max_batch_size: int,
                            shapes: dict[str, Sequence[int]] | None = None) -> ModelSignature:
    """A signature derived from the server's model metadata, for runs without a manifest.

    The batch axis is dropped when the model batches; other -1 dims take their size from `shapes`
    (the `--shape NAME:dims` flags) and are refused without one, because perf_analyzer cannot guess them.
    """
    shapes = {k: tuple(int(d) for d in v) for k, v in (shapes or {}).items()}

    def spec(t: dict[str, Any], is_input: bool) -> TensorSpec:
        dims = list(t["shape"])[1:] if max_batch_size > 0 else list(t["shape"])
        example = shapes.get(t["name"])
        if -1 in dims and example is None:
            if is_input:
                raise SpecError(
                    f"input {t['name']!r} has dynamic dims {dims}: pass --shape {t['name']}:"
                    + ",".join("N" if d == -1 else str(d) for d in dims) + " or --manifest PATH"
                )
            example = tuple(1 if d == -1 else d for d in dims)  # unknown output size: shm size falls back to 100 KB
        return TensorSpec(name=t["name"], shape=tuple(dims), dtype=numpy_dtype(t["datatype"]), example_shape=example)

    return ModelSignature(
        inputs=tuple(spec(t, True) for t in metadata.get("inputs", [])),
        outputs=tuple(spec(t, False) for t in metadata.get("outputs", [])),
    )


def repository_models(url: str, protocol: str) -> list[str] | None:
    """Names in the server's repository index (loaded or not); None if the server does not say."""
    client = None
    try:
        client = _client(url, protocol)
        if protocol == "grpc":
            index = client.get_model_repository_index(as_json=True).get("models", [])
        else:
            index = client.get_model_repository_index()
        return sorted({m.get("name", "") for m in index} - {""})
    except Exception:  # noqa: BLE001 - a server that cannot list its models: keep waiting for readiness
        return None
    finally:
        if client is not None:
            _close(client)


def wait_until_ready(url: str, protocol: str, model: str, version: str = "", timeout_s: float = 60.0) -> None:
    """Poll until the model is ready; a model the server's repository does not hold fails at once, naming
    the models it does hold (waiting would not help)."""
    deadline = time.monotonic() + timeout_s
    while True:
        reason = health_reason(url, protocol, model, version)
        if reason is None:
            return
        if reason.startswith("model "):  # the server answers; is the model there at all?
            have = repository_models(url, protocol)
            if have is not None and model not in have:
                raise ServerNotReady(
                    f"{reason}: the server's repository has no model {model!r}; it has "
                    f"{', '.join(have) or 'no models'} (pass one of them to --model-name)")
        if time.monotonic() > deadline:
            raise ServerNotReady(f"{reason} after waiting {timeout_s:.0f} s: start the server / load the model first")
        time.sleep(0.2)  # polling interval of the health check


def preflight(url: str, protocol: str, model: str, version: str, signature: HasSignature, batched: bool,
              timeout_s: float = 60.0) -> None:
    """Wait for readiness, then send one real request and check that every output comes back non-empty.

    Catches a model that loads but cannot answer (e.g. the Python backend's numpy-2 empty-tensor bug)
    before perf_analyzer spends minutes timing errors.
    """
    wait_until_ready(url, protocol, model, version, timeout_s)
    if protocol == "grpc":
        import tritonclient.grpc as tc
    else:
        import tritonclient.http as tc
    client = _client(url, protocol)
    try:
        inputs = []
        rng = np.random.default_rng(0)
        for spec in signature.inputs:
            data = spec.example(1 if batched else 0, rng)
            tensor = tc.InferInput(spec.name, list(data.shape), spec.triton_dtype)
            tensor.set_data_from_numpy(data)
            inputs.append(tensor)
        outputs = [tc.InferRequestedOutput(t.name) for t in signature.outputs]
        try:
            result = client.infer(model, inputs, model_version=version, outputs=outputs)
        except Exception as err:  # noqa: BLE001
            raise ServerNotReady(f"model {model!r} is ready but a test request failed: {err}") from err
        for spec in signature.outputs:
            value = result.as_numpy(spec.name)
            if value is None or value.size == 0:
                raise ServerNotReady(
                    f"model {model!r} answered with an empty {spec.name!r}: the server's Python environment is "
                    "broken (numpy >= 2 in the backend returns empty tensors; install numpy<2)"
                )
    finally:
        _close(client)


# ---- the sweep ---------------------------------------------------------------------------------

@dataclass
class SweepOutcome:
    kind: str
    result_dir: Path
    csv_path: Path
    rows: list[dict[str, Any]]
    measured: list[SweepPoint] = field(default_factory=list)
    skipped: list[SweepPoint] = field(default_factory=list)
    report: dict[str, Path] = field(default_factory=dict)

    @property
    def unstable(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if not r.get("stable", True)]


PointCallback = Callable[[SweepPoint, PointResult], None]


def run_sweep(
    kind: str,
    model_name: str,
    server_url: str | None,
    signature: HasSignature | None,
    points: Sequence[SweepPoint],
    options: PerfOptions,
    result_dir: str | Path,
    *,
    model_version: str = "",
    server: "LocalTritonServer | None" = None,
    precision: str | None = None,
    number_of_model_instances: int | None = None,
    shapes: dict[str, Sequence[int]] | None = None,
    manifest_path: str | Path | None = None,
    on_point_done: PointCallback | None = None,
    progress: bool = True,
    remeasure_unstable: bool = False,
    build_report: bool = True,
    ready_timeout_s: float = 60.0,
    reuse: str = "auto",
) -> SweepOutcome:
    """Measure every point not yet in `<result_dir>/<kind>.csv` under this run's identity, then write the tables,
    run.json and report. Nothing is written before the server has answered a real request (a run that never
    started leaves no trace); `reuse` is runs.ledger's policy: auto | resume | fresh."""
    result_dir = Path(result_dir)
    url = server_url or _server_url(server, options.protocol)
    binary, _ = check_perf_analyzer()
    points = sorted(dict.fromkeys(points))

    wait_until_ready(url, options.protocol, model_name, model_version, ready_timeout_s)
    try:
        model_config = fetch_model_config(url, options.protocol, model_name, model_version)
        max_batch = int(model_config.get("max_batch_size", 0) or 0)
        if signature is None:
            metadata = fetch_model_metadata(url, options.protocol, model_name, model_version)
    except Exception as err:  # noqa: BLE001 - tritonclient raises its own exception types
        raise ServerNotReady(f"cannot read model {model_name!r} from {url} ({options.protocol}): {err}") from err
    if signature is None:
        signature = signature_from_metadata(metadata, max_batch, shapes)
    too_big = [p.batch_size for p in points if p.batch_size > max(max_batch, 1)]
    if too_big:
        raise SweepError(f"batch sizes {sorted(set(too_big))} exceed the model's max_batch_size {max_batch}")
    preflight(url, options.protocol, model_name, model_version, signature, max_batch > 0, ready_timeout_s)

    instances = instance_count(model_config)
    if number_of_model_instances and number_of_model_instances != instances:
        print(f"warning: --number-of-model-instances {number_of_model_instances} but the server's config has "
              f"{instances}; recording the server's value", file=sys.stderr)
    precision = (precision or getattr(signature, "precision", "") or _io_precision(signature)).upper()
    raw_dir = result_dir / "raw"
    input_data = None
    if needs_input_file(signature) and options.input_data in ("random", "zero"):
        input_data = str(write_input_data_json(signature, raw_dir / f"{kind}_input_data.json", options.input_data))

    server_version = fetch_server_version(url, options.protocol)
    identity = sweep_identity(model_config, server_version, manifest_path, options, input_data)
    store = ResultsStore(result_dir, kind, identity, reuse).open()
    done = store.completed(include_unstable=not remeasure_unstable)
    todo = [p for p in points if p.key not in done]
    skipped = [p for p in points if p.key in done]
    if skipped:
        print(f"{kind}: skipping {len(skipped)} completed points (already in {store.csv_path})", flush=True)

    section = {
        "points": [p.key for p in points],
        "perf_options": options.measurement_fields(),
        "perf_command_example": build_command(
            model_name, url, points[0].batch_size, points[0].concurrency, signature, options,
            raw_dir / f"{kind}_{points[0].name}.csv", model_version=model_version, input_data=input_data, binary=binary),
        "identity": identity.id,
    }
    config = {
        "model_name": model_name,
        "model_version": model_version or "latest",
        "server_url": url,
        "protocol": options.protocol,
        "precision": precision,
        "manifest": str(manifest_path) if manifest_path else None,
        "signature": _signature_dict(signature),
        "model_config": model_config,
        "triton_instances": instances,
        "number_of_model_instances_flag": number_of_model_instances,
    }
    _record_run(result_dir, kind, config, section, server_version, identity)

    outcome = SweepOutcome(kind, result_dir, store.csv_path, store.rows(), skipped=skipped)
    bar = _progress(len(points), len(skipped), kind, progress)
    try:
        for point in todo:
            if bar is not None:
                bar.set_postfix_str(f"batch {point.batch_size}, concurrency {point.concurrency}")
            _check_alive(server, url, options.protocol, model_name, model_version, kind, point, store, None)
            try:
                result = run_point(
                    model_name, url, point.batch_size, point.concurrency, signature, options,
                    raw_dir / f"{kind}_{point.name}.csv", model_version=model_version, input_data=input_data,
                    binary=binary,
                )
            except PerfAnalyzerError as err:
                _check_alive(server, url, options.protocol, model_name, model_version, kind, point, store, err)
                raise SweepError(
                    f"{err}\n{len(store.rows())} completed point(s) are kept in {store.csv_path}; fix the cause and "
                    "rerun the same command to resume."
                ) from err
            row = result.row()
            row.update({"Precision": precision, "Triton Instances": instances})
            store.add(row)
            outcome.measured.append(point)
            if not result.stable:
                _warn(f"{kind} {point.name}: UNSTABLE - {result.note} (marked stable=False)", bar)
            if bar is not None:
                bar.update(1)
            if on_point_done is not None:
                on_point_done(point, result)
    finally:
        if bar is not None:
            bar.close()
        outcome.rows = store.rows()
        _write_markdown(result_dir, kind, outcome.rows)

    section["completed"] = len(outcome.rows)
    section["unstable_points"] = [[r["Client Batch Size"], r["Concurrent client requests"]] for r in outcome.unstable]
    _record_run(result_dir, kind, config, section, server_version, identity)
    if build_report:
        from ..report.build import build_report as _build

        outcome.report = _build(result_dir)
    return outcome


def _io_precision(signature: HasSignature) -> str:
    """Without a manifest, the datatype of the first floating-point input stands in for the precision."""
    for spec in signature.inputs:
        if np.issubdtype(np.dtype(spec.dtype), np.floating):
            return spec.triton_dtype
    return "N/A"


def _signature_dict(signature: HasSignature) -> dict[str, Any]:
    return {"inputs": [t.to_dict() for t in signature.inputs], "outputs": [t.to_dict() for t in signature.outputs]}


def _server_url(server: "LocalTritonServer | None", protocol: str) -> str:
    if server is None:
        raise ValueError("give server_url or a LocalTritonServer")
    return server.grpc_url if protocol == "grpc" else server.http_url


def _check_alive(server, url, protocol, model, version, kind, point, store, err: PerfAnalyzerError | None) -> None:
    """Raise ServerDiedError (with the server log tail, else perf_analyzer's output) if the server is gone."""
    reason = None
    if server is not None and not server.is_alive():
        code = server.process.poll() if getattr(server, "process", None) else None
        reason = (f"tritonserver was killed by signal {-code}" if isinstance(code, int) and code < 0
                  else f"tritonserver process exited (code {code})")
    if reason is None:
        reason = health_reason(url, protocol, model, version)
    if reason is None and err is not None and err.connection:
        reason = "perf_analyzer lost the connection"
    if reason is None:
        return
    if server is not None:
        detail = f"Server log tail ({getattr(server, 'log_path', '')}):\n{server.log_tail(30)}"
    else:
        detail = "perf_analyzer output:\n" + (err.output.strip()[-3000:] if err is not None else "(not started)")
    raise ServerDiedError(
        f"the server stopped answering during the {kind} sweep at batch {point.batch_size}, concurrency "
        f"{point.concurrency}: {reason}.\n{len(store.rows())} completed point(s) are kept in {store.csv_path}; "
        f"restart the server and rerun the same command to resume.\n{detail}"
    ) from err


def _progress(total: int, done: int, kind: str, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=done, desc=f"{kind} sweep", unit="point", dynamic_ncols=True)


def _warn(message: str, bar) -> None:
    if bar is not None:
        bar.write(message, file=sys.stderr)
    else:
        print(message, file=sys.stderr)


def _write_markdown(result_dir: Path, kind: str, rows: list[dict[str, Any]]) -> None:
    from ..report.tables import full_table

    atomic_write_text(result_dir / f"{kind}.md", "Full tabular data\n\n" + full_table(kind, rows) + "\n")


def _record_run(result_dir: Path, kind: str, config: dict[str, Any], section: dict[str, Any],
                server_version: str | None, identity: RunIdentity) -> None:
    """run.json: this invocation's metadata, the other sweep kind's section when both share a folder, and every
    identity whose rows the folder holds (runs.ledger)."""
    previous = read_run_json(result_dir)
    sweeps = dict(previous.get("config", {}).get("sweeps", {}))
    sweeps[kind] = section
    record_run(result_dir, {**config, "sweeps": sweeps}, server_version, identity)


# ---- command line (shared by the offline and online scripts) -----------------------------------

_LOOPBACK = ("localhost", "127.0.0.1", "::1", "[::1]")


def add_target_arguments(parser) -> None:
    """Server, model and output flags, named like the DLE scripts'."""
    g = parser.add_argument_group("server and model")
    g.add_argument("--server-url", default=None,
                   help="host:port of the server (default: 127.0.0.1:8001 for grpc, 127.0.0.1:8000 for http)")
    g.add_argument("--model-name", required=True)
    g.add_argument("--model-version", default="", help="default: the latest version")
    g.add_argument("--manifest", default=None, metavar="PATH",
                   help="manifest.json of the converted model (or its folder); without it the signature comes "
                        "from the server's model metadata and dynamic dims need --shape")
    g.add_argument("--shape", action="append", default=[], metavar="NAME:D1,D2",
                   help="size of an input's dynamic dims, without the batch axis (repeatable)")
    g.add_argument("--precision", default=None, help="recorded in the tables (default: the manifest's)")
    g.add_argument("--number-of-model-instances", type=int, default=None,
                   help="recorded; the server's instance_group count is what the tables show")
    o = parser.add_argument_group("results")
    o.add_argument("--result-path", default=None, metavar="DIR",
                   help="run folder (default: results/<model-name>); rerunning into it resumes")
    add_reuse_arguments(o, "points")
    o.add_argument("--remeasure-unstable", action="store_true", help="on resume, measure unstable points again")
    o.add_argument("--no-report", action="store_true", help="skip report.md/report.html/plots")
    o.add_argument("--no-progress", action="store_true", help="no progress bar")
    o.add_argument("--ready-timeout", type=float, default=60.0, help="seconds to wait for the model (default 60)")


def parse_shapes(items: Sequence[str]) -> dict[str, list[int]]:
    shapes = {}
    for item in items:
        name, _, dims = item.rpartition(":")
        try:
            shapes[name] = [int(d) for d in dims.split(",")]
        except ValueError:
            raise UserInputError(f"--shape {item!r}: expected NAME:D1,D2,... with integer dims") from None
        if not name:
            raise UserInputError(f"--shape {item!r}: expected NAME:D1,D2,...")
    return shapes


def _with_real_input_data(args, options, manifest, url: str, result_dir: Path):
    """--data-dir/--dataloader: the user's samples as perf_analyzer JSON in the run folder, validated against
    the manifest's signature (or the served model's metadata); the options then point at that file."""
    from dataclasses import replace

    from ..perf.analyzer import real_input_data

    if getattr(args, "data_dir", None) is None and getattr(args, "dataloader", None) is None:
        return options
    wait_until_ready(url, options.protocol, args.model_name, args.model_version, args.ready_timeout)  # then write
    if manifest is not None:
        signature, batched, precision = manifest.signature, manifest.max_batch_size > 0, manifest.precision
    else:
        config = fetch_model_config(url, options.protocol, args.model_name, args.model_version)
        max_batch = int(config.get("max_batch_size", 0) or 0)
        metadata = fetch_model_metadata(url, options.protocol, args.model_name, args.model_version)
        signature = signature_from_metadata(metadata, max_batch, parse_shapes(args.shape))
        batched, precision = max_batch > 0, "fp32"
    path = real_input_data(args, signature, result_dir / "raw", precision=precision, batched=batched)
    if path is None:
        return options
    print(f"input data: {args.perf_samples} real sample(s) at most from {args.dataloader or args.data_dir} "
          f"-> {path}", flush=True)
    return replace(options, input_data=path)


def run_cli(kind: str, args, points_arg: Sequence[int] | str, fixed: int) -> int:
    """Run one sweep from parsed flags; print the table; return the exit code (errors as messages, no traceback)."""
    from ..perf.analyzer import PerfAnalyzerNotFound, perf_options_from_args
    from ..spec import Manifest

    try:
        url = args.server_url or ("127.0.0.1:8001" if args.protocol == "grpc" else "127.0.0.1:8000")
        shm = args.shared_memory
        if shm == "auto":
            host = url.split("://")[-1].rsplit(":", 1)[0]
            shm = "system" if host in _LOOPBACK else "none"
        options = perf_options_from_args(args, shared_memory=shm)
        manifest = Manifest.load(args.manifest) if args.manifest else None
        from ..repository.names import check_model_name

        result_dir = Path(args.result_path or Path("results") / check_model_name(args.model_name))
        options = _with_real_input_data(args, options, manifest, url, result_dir)
        common = dict(
            model_version=args.model_version, precision=args.precision,
            number_of_model_instances=args.number_of_model_instances, shapes=parse_shapes(args.shape),
            manifest_path=args.manifest, progress=not args.no_progress, remeasure_unstable=args.remeasure_unstable,
            build_report=not args.no_report, ready_timeout_s=args.ready_timeout, reuse=args.reuse,
        )
        if kind == "online":
            from .online import run_online

            outcome = run_online(args.model_name, url, manifest, points_arg, options, result_dir,
                                 batch_size=fixed, **common)
        else:
            from .offline import run_offline

            outcome = run_offline(args.model_name, url, manifest, points_arg, options, result_dir,
                                  concurrency=fixed, **common)
    except (SweepError, PerfAnalyzerNotFound, IdentityMismatch, SpecError, ValueError, FileNotFoundError) as err:
        # a dead server, an unknown model, a missing tool, bad flags, a refused --resume: exit 2 (the README's
        # table); the completed points are kept and the same command resumes
        print(f"error: {err}", file=sys.stderr)
        return 2
    from ..report.tables import full_table

    print(f"\nFull tabular data ({kind}, {outcome.csv_path}):\n")
    print(full_table(kind, outcome.rows))
    if outcome.report:
        print(f"\nreport: {outcome.report.get('report.html')}")
    if outcome.unstable:
        print(f"warning: {len(outcome.unstable)} point(s) are unstable (stable=False in {outcome.csv_path})",
              file=sys.stderr)
    return 0
