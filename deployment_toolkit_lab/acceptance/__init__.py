"""GPU acceptance in one command (`make gpu-check`, `deployment-toolkit-lab gpu-check`): plan, step runner, README.

In the lab because it measures the toolkit itself (its own scripts, run as steps on a GPU host), as Model Analyzer
keeps its QA in `qa/`; it imports the toolkit, never the reverse."""
