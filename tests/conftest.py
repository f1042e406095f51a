"""Test setup shared by every test module."""

import sys
from pathlib import Path

# The scripts' tests import them as `python scripts/NAME.py` runs them: with scripts/ first
# on sys.path, where they find each other and their shared `common` module.
SCRIPTS = str(Path(__file__).resolve().parent.parent / "scripts")
if SCRIPTS not in sys.path:
    sys.path.insert(0, SCRIPTS)
