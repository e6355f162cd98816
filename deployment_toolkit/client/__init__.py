"""Clients: the only package that talks to a Triton server (perf_analyzer aside, a subprocess).

server_api: health and readiness waits, server/model metadata, the config the server loaded, the repository
index and load/unload, statistics, the REST calls of the server process manager; infer: inference over
HTTP/gRPC, optionally through system shared memory. Transport only: data sources and the npz dump
format live in `data`.
"""
