"""The GPU scripts (scripts/gpu_*.py, run by scripts/gpu_checks.sh on a machine with a GPU)
checked where there is none: the memory-pressure step runs its CPU dry run, and the others
refuse with a message and exit 2 instead of failing on the way."""
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def run(script, *args):
    return subprocess.run([sys.executable, str(SCRIPTS / script), *args],
                          capture_output=True, text=True, timeout=300)


def test_memory_pressure_dry_run_steps_on_the_cpu():
    pytest.importorskip("torch")
    r = run("gpu_memory_pressure.py", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "dry run ok" in r.stdout


@pytest.mark.parametrize("script", ["gpu_stream_bench.py", "gpu_workspace_probe.py",
                                    "gpu_memory_pressure.py", "gpu_host_issue.py"])
def test_without_a_gpu_the_scripts_say_so(script):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: scripts/gpu_checks.sh runs these")
    r = run(script)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "no CUDA device visible" in r.stderr


def test_bad_arguments_are_refused():
    r = run("gpu_stream_bench.py", "--params", "5")
    assert r.returncode == 2
    assert "--params" in r.stderr
