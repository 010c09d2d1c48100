import json
import os
import subprocess
import sys

from conftest import ROOT


def test_maskable_ppo_example_runs(quickstart):
    """A few hundred steps of examples/python/maskable_ppo.py (smoke: it runs, it reports)."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "python" / "maskable_ppo.py"), "--config",
         quickstart, "--max-steps", "256", "--n-envs", "2", "--n-steps", "64",
         "--batch-size", "64", "--eval-every", "128", "--epochs", "1"],
        check=True, capture_output=True, text=True, env=dict(os.environ), timeout=600)
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert rows[0]["oracle_return"] > 0
    final = rows[-1]
    assert final["steps"] == 256 and final["result"] in ("reached", "not reached")
    assert 0 < final["ratio"] <= 1.05
