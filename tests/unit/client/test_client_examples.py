"""examples/compiled_pub_sub.py runs, as documented, against a (scripted) driver: compiled offer and poll
loops through the handles a Publication and an Image give (``compiled()``).

It runs as a script in a child process, as a user would run it: Numba's cache records the module name of
each cached function, so importing the example under another name in this process would leave cache
entries a script run could not load.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.client_support import FakeDriver

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "compiled_pub_sub.py"


@pytest.mark.requires_jit  # compiled handles exist only with Numba's JIT on
def test_compiled_pub_sub_example(shm_dir):
    with FakeDriver(shm_dir / "aeron") as driver:
        completed = subprocess.run(
            [sys.executable, str(EXAMPLE), "--dir", str(driver.aeron_dir), "--messages", "50000", "--length", "100",
             "--timeout", "60"],
            capture_output=True, text=True, timeout=180,
        )
        assert driver.errors == []
    assert completed.returncode == 0, completed.stderr
    assert "sent=50000 received=50000 out_of_order=0" in completed.stdout
