"""Files the config generator copies into a Python-backend model's version directory: {name there: file here}.
`runtimes.py` is deployment_toolkit/runtimes/artifact.py, which imports nothing of the toolkit."""
from pathlib import Path

RUNTIME_DIR = Path(__file__).parent
RUNTIME_FILES = {"model.py": RUNTIME_DIR / "model.py",
                 "runtimes.py": RUNTIME_DIR.parent.parent / "runtimes" / "artifact.py"}
