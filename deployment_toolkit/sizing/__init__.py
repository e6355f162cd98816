"""Fleet sizing from measured perf curves (triton/size_fleet.py).

- plan: what one replica sustains under a p99 SLO (best measured point, never extrapolated), replicas, GPUs or
  hosts, nodes, cost; Little's-law consistency check; geospatial coverage; scaling tables; the SLO frontier.
- output: sizing.md, sizing.csv and the cost-frontier plot sizing.png.
- capacity: open-loop capacity (perf_analyzer --request-rate-range, async, Poisson/constant): bracket and bisect the
  highest rate a replica keeps up with at the SLO; ratestore keeps the points (openloop.csv), openloop replays them.
- confirm: the plan in open loop at its per-replica rate, derated and confirmed again on failure; a burst check.
- fleet: N embedded servers behind nginx (gRPC), fleet capacity against N x one replica, CPU seconds per part.
- k8s: Deployment/Service/HPA of the NGC Triton image and a KServe InferenceService, with validation.
"""
from .plan import (
    DEFAULT_GSD_M,
    EARTH_LAND_KM2,
    LITTLE_TOLERANCE,
    Demand,
    Plan,
    Point,
    Prices,
    Run,
    Sizing,
    SizingError,
    Sustainable,
    ceil_div,
    coverage_km2_per_s,
    frontier,
    little_flags,
    load_prices,
    load_runs,
    points_of,
    scaling_tables,
    size,
    sustainable,
)

__all__ = [
    "DEFAULT_GSD_M", "EARTH_LAND_KM2", "LITTLE_TOLERANCE", "Demand", "Plan", "Point", "Prices", "Run", "Sizing",
    "SizingError", "Sustainable", "ceil_div", "coverage_km2_per_s", "frontier", "little_flags", "load_prices",
    "load_runs", "points_of", "scaling_tables", "size", "sustainable",
]
