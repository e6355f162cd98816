"""Clients: tritonclient inference (HTTP/gRPC, system shared memory), data sources and the npz dump format."""
