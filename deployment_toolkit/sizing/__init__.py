"""Fleet sizing from measured perf curves (triton/size_fleet.py).

- runs: the measured sweeps and their points, with the Little's-law consistency check.
- sustainable: what one replica sustains under a p99 SLO (best measured point, never extrapolated).
- plan: replicas, GPUs or hosts, nodes, cost, geospatial coverage; the ranking of plans.
- frontier: the cheapest plan across SLOs and the scaling tables.
- output: sizing.md, sizing.csv and the cost-frontier plot sizing.png.
- ratepoint: one open-loop point (perf_analyzer --request-intervals from a seeded Poisson/constant schedule, async,
  latency also from the intended send time) and its pass rule.
- capacity: bracket and bisect the highest rate a replica keeps up with at the SLO, repeated for the spread;
  ratestore keeps the points (openloop.csv), openloop replays them.
- confirm: the plan in open loop at its per-replica rate, derated and confirmed again on failure; a burst check.
- fleet: N embedded servers behind nginx (gRPC), fleet capacity against N x one replica, CPU seconds per part.
- k8s: Deployment/Service/HPA of the NGC Triton image and a KServe InferenceService, with validation.
"""
from .frontier import frontier, scaling_tables
from .plan import DEFAULT_GSD_M, EARTH_LAND_KM2, Demand, Plan, Prices, Sizing, ceil_div, coverage_km2_per_s, \
    load_prices, size
from .runs import LITTLE_TOLERANCE, Point, Run, SizingError, little_flags, load_runs, points_of
from .sustainable import Sustainable, sustainable

__all__ = [
    "DEFAULT_GSD_M", "EARTH_LAND_KM2", "LITTLE_TOLERANCE", "Demand", "Plan", "Point", "Prices", "Run", "Sizing",
    "SizingError", "Sustainable", "ceil_div", "coverage_km2_per_s", "frontier", "little_flags", "load_prices",
    "load_runs", "points_of", "scaling_tables", "size", "sustainable",
]
