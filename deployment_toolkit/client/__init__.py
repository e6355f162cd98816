"""Clients: the only package that talks to a Triton server (perf_analyzer aside, a subprocess).

triton: `TritonClient`, one class on a URL with its protocol (health, readiness, metadata, the loaded config as
the typed ModelConfig, repository index and load/unload, statistics, preflight, inference); url: `ServerUrl`;
connection: tritonclient with a deadline on every call; shm: system shared-memory regions; metrics: the Prometheus
endpoint's text. Transport only: data sources and the npz dump format live in `data`.
"""
from . import connection  # noqa: F401  (first: it imports the C-extension client libraries with signals held)
from .errors import InferenceError, ServerNotReady
from .triton import OutputRequest, TritonClient, config_from_json, infer_many, instance_count
from .url import ServerUrl

__all__ = ["InferenceError", "OutputRequest", "ServerNotReady", "ServerUrl", "TritonClient", "config_from_json",
           "infer_many", "instance_count"]
