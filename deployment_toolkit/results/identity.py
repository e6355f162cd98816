"""The identity a measurement was taken under, and the one rule for reusing it.

A measured point may be reused (a resumed sweep, a search picking up where it stopped) only when everything that
defines its numbers is the same as now: the host (CPU model, usable cores, GPUs and driver), the server version,
the model config the server actually loaded, the artifact's digest, the perf options, the input data and the
toolkit version. Each of those is one field here; the short `id` is what CSV rows carry and run.json resolves.
"""
from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping

from .runinfo import cpu_info, gpu_info

DISTRIBUTION = "triton-deployment-toolkit"
# Fields of a server's model config that name the run's surroundings rather than what is measured.
_VOLATILE_CONFIG_KEYS = ("model_repository_agents",)


def host_identity() -> dict[str, Any]:
    """What of the host changes the numbers: CPU model, cores this process may use, GPUs and their driver.

    Memory size, hostname and load are recorded in run.json but are not part of the identity: a point measured on
    an identical machine under another hostname is the same measurement.
    """
    cpu = cpu_info()
    gpus = gpu_info()
    gpu_list = [{"name": g.get("name"), "driver": g.get("driver")} for g in gpus] if isinstance(gpus, list) else []
    return {"cpu_model": cpu.get("model"), "usable_cores": cpu.get("usable_cores"), "arch": cpu.get("arch"),
            "gpus": gpu_list}


def toolkit_version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:  # running from a checkout that was never installed
        return "unknown"


_LIBRARIES = ("torch", "onnxruntime", "onnxruntime-gpu", "onnx", "numpy", "tritonclient")


def library_versions() -> dict[str, str]:
    """Versions of the libraries whose change changes the numbers (from package metadata: no imports)."""
    out = {}
    for dist in _LIBRARIES:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return out


def file_digest(path: str | Path, chunk: int = 1 << 20) -> str:
    """sha256 of a file, or of a folder's files (relative names and contents, in sorted order)."""
    path = Path(path)
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        if path.is_dir():
            h.update(str(f.relative_to(path)).encode() + b"\0")
        with open(f, "rb") as fh:
            while block := fh.read(chunk):
                h.update(block)
    return h.hexdigest()


def input_data_digest(input_data: str | Path | None) -> str:
    """'random' / 'zero' (perf_analyzer generates the data) name themselves; a file or folder is hashed."""
    if input_data is None:
        return "random"
    text = str(input_data)
    if text in ("random", "zero"):
        return text
    path = Path(text)
    if path.is_file():  # asked again for every stored key: hashed once per file version
        st = path.stat()
        return _digest_of(str(path.resolve()), st.st_size, st.st_mtime_ns)
    return "sha256:" + file_digest(text)


@functools.lru_cache(maxsize=256)
def _digest_of(path: str, size: int, mtime_ns: int) -> str:
    return "sha256:" + file_digest(path)


def key_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Measurement fields (PerfOptions.measurement_fields) as a stored key or an identity holds them: input data
    from a file by its content, not its path. Keyed by the path, a result folder moved (or a pod's folder gathered
    elsewhere) held no stored point for a pipeline, whose inputs are written inside it, and measured all again."""
    out = dict(fields)
    data = out.get("input_data")
    if data is not None and Path(str(data)).exists():  # random / zero name themselves; a path not there yet stays
        out["input_data"] = input_data_digest(data)
    return out


def artifact_digest(manifest_path: str | Path | None) -> str | None:
    """The artifact's digest as the manifest records it; hashed from the artifact's files for manifests written
    before the digest was recorded. None without a manifest (the server's model files are not ours to read)."""
    if manifest_path is None:
        return None
    from ..spec import MANIFEST_NAME, Manifest

    path = Path(manifest_path)
    directory = path if path.is_dir() else path.parent
    manifest = Manifest.load(path if path.is_file() else directory / MANIFEST_NAME)
    recorded = getattr(manifest, "artifact_sha256", None) or (manifest.verification or {}).get("artifact_sha256")
    artifact = directory / manifest.artifact
    if recorded and artifact.is_file() and file_digest(artifact) != recorded:  # never record a digest that lies
        from ..spec import SpecError

        raise SpecError(f"{directory / MANIFEST_NAME} records artifact sha256 {recorded[:12]}..., but {artifact.name} "
                        "is another file: convert the model again rather than editing either")
    if recorded:
        return f"sha256:{recorded}"
    h = hashlib.sha256()
    for name in manifest.files:
        f = directory / name
        if f.is_file():
            h.update(name.encode() + b"\0" + file_digest(f).encode())
    return "sha256:" + h.hexdigest()


def served_config(model_config: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if model_config is None:
        return None
    return {k: v for k, v in model_config.items() if k not in _VOLATILE_CONFIG_KEYS}


@dataclass(frozen=True)
class RunIdentity:
    """Everything that defines a measured number. Equal identities (equal `id`) may share and reuse points."""

    host: dict[str, Any]
    server_version: str | None
    model_config: dict[str, Any] | None
    artifact_digest: str | None
    perf_options: dict[str, Any]
    input_data: str
    toolkit_version: str
    # the libraries that run the model in-process or in the Python backend (ONNX Runtime, torch) and the client
    libraries: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # what else a store's numbers depend on (e.g. points' kind)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "RunIdentity":
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known})

    @property
    def id(self) -> str:
        return identity_id(self.to_dict())

    def differences(self, stored: Mapping[str, Any] | None) -> list[str]:
        """'field: stored X, now Y' for each field that differs (nested fields by dotted name)."""
        if not stored:
            return ["no identity was recorded for the stored rows (measured before row provenance existed)"]
        return _diff(dict(stored), self.to_dict())


def identity_id(d: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _diff(a: Mapping[str, Any], b: Mapping[str, Any], prefix: str = "") -> list[str]:
    out = []
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if x == y:
            continue
        name = f"{prefix}{key}"
        if isinstance(x, Mapping) and isinstance(y, Mapping):
            out += _diff(x, y, name + ".")
        else:
            out.append(f"{name}: stored {_short(x)}, now {_short(y)}")
    return out


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def summary(differences: list[str], limit: int = 3) -> str:
    """One line: the first few differences, and how many more."""
    head = "; ".join(differences[:limit])
    more = len(differences) - limit
    return head + (f"; and {more} more" if more > 0 else "")
