"""`deployment-toolkit plan`: from a model to a confirmed fleet plan in one run (pipeline.py), and its report
(report.py). It sits above search, perf and sizing and composes their functions; nothing imports it but the
command."""
from .pipeline import Checks, Demand, Deploy, PlanError, PlanResult, make_plan, sweep_levels

__all__ = ["Checks", "Demand", "Deploy", "PlanError", "PlanResult", "make_plan", "sweep_levels"]
