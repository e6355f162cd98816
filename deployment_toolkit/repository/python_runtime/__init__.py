"""Files the config generator copies into a Python-backend model's version directory."""
from pathlib import Path

RUNTIME_DIR = Path(__file__).parent
RUNTIME_FILES = ("model.py", "runtimes.py")
