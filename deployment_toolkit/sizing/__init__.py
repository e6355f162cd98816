"""Fleet sizing from measured perf curves (planned: issue 9)."""
