"""Reports from a run folder: DLE-style markdown tables, PNG plots, a self-contained HTML page, run comparison."""
from .build import build_report, compare_runs
from .tables import config_table, full_table, hardware_section, load_rows

__all__ = ["build_report", "compare_runs", "config_table", "full_table", "hardware_section", "load_rows"]
