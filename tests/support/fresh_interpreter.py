"""Run code in a fresh Python interpreter, for checks of what a worker process imports."""

from __future__ import annotations

import subprocess
import sys


def imports_pandas(code: str) -> bool:
    """Whether running `code` in a fresh interpreter imports pandas (the code must succeed)."""
    run = code + "\nimport sys\nprint('pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", run], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1] == "True"
