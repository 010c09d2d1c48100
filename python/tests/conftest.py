import os
import pathlib
import shutil
import subprocess

import pytest

# ctest's python_gymnasium_oldest sets this: the run must see that Gymnasium, not the venv's.
_EXPECTED = os.environ.get("SHARDGYM_EXPECT_GYMNASIUM")
if _EXPECTED:
    import gymnasium
    if gymnasium.__version__ != _EXPECTED:
        raise RuntimeError(f"SHARDGYM_EXPECT_GYMNASIUM={_EXPECTED} but gymnasium "
                           f"{gymnasium.__version__} was imported from {gymnasium.__file__}; "
                           f"run scripts/setup.sh (it installs .venv/gymnasium-oldest)")

ROOT = pathlib.Path(os.environ.get("SHARDGYM_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
QUICKSTART = str(ROOT / "experiments" / "quickstart.yaml")


def cli():
    """The shardgym CLI of this build, or None (a pip-installed package has none)."""
    binary = os.environ.get("SHARDGYM_BINARY_DIR")
    path = pathlib.Path(binary, "experiments", "shardgym") if binary else None
    if path and path.exists():
        return str(path)
    return shutil.which("shardgym")


def cli_or_skip(purpose=""):
    """The CLI of cli(), or the test is skipped, saying what the CLI was needed for."""
    exe = cli()
    if exe is None:
        pytest.skip(f"no shardgym CLI{purpose} (set SHARDGYM_BINARY_DIR to a build)")
    return exe


@pytest.fixture(scope="session")
def quickstart():
    return QUICKSTART


@pytest.fixture(scope="session")
def trace(tmp_path_factory):
    """A trace of one Megatron episode of the quickstart (recorded by the CLI)."""
    exe = cli_or_skip(" to record a trace")
    out = tmp_path_factory.mktemp("trace")
    subprocess.run([exe, "compare", QUICKSTART, "--agents", "megatron", "--seeds", "0",
                    "--no-references", "--out", str(out)], check=True, capture_output=True)
    return str(out / "megatron.h5")
