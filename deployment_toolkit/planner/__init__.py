"""`deployment-toolkit plan`: from a model to a confirmed fleet plan in one run (pipeline.py), and its report
(report.py). It sits above search, perf and sizing and composes their functions; only the command and the Python
API (api.py) import it."""
from .pipeline import Checks, Demand, Deploy, PlanError, PlanResult, check_demand, make_plan, sweep_levels

__all__ = ["Checks", "Demand", "Deploy", "PlanError", "PlanResult", "check_demand", "make_plan", "sweep_levels"]
