"""Free ports for a server: three picked at once are distinct (picked one at a time, the kernel can hand the same
just-released port out twice, and tritonserver refuses gRPC and metrics on one port: the start-up race test's
failure under load)."""
from __future__ import annotations

import socket

from deployment_toolkit.server.local import LocalTritonServer, ServerConfig, free_ports, port_is_free


def test_ports_picked_together_are_distinct_and_free():
    for _ in range(200):
        ports = free_ports(3)
        assert len(set(ports)) == 3
    assert all(port_is_free(p) for p in free_ports(3))


def test_a_server_claims_three_distinct_ports_none_of_them_one_it_was_given(tmp_path):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        given = held.getsockname()[1]
    for _ in range(50):
        server = LocalTritonServer(ServerConfig(tmp_path, http_port=0, grpc_port=given, metrics_port=0))
        server._claim_ports()
        ports = (server.http_port, server.grpc_port, server.metrics_port)
        assert len(set(ports)) == 3 and server.grpc_port == given
