"""shardgym.distributed: a small suite run as Ray tasks on a local Ray bound to 127.0.0.1 gives
the table of one `shardgym suite` run (every figure but the wall times); bad input, a failing
cell and a cell past the timeout end the run with the reason, never a hang.

Skipped only where Ray is not installed (python/requirements.txt installs it)."""
import json
import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("ray")

from conftest import ROOT, cli  # noqa: E402
from shardgym import distributed  # noqa: E402

# Two of the adaptivity suite's tasks, the quickest (about 2 s per test instance for the three
# references and replan on one core); two test instances.
SUITE = f"""name: small
tasks: [{ROOT}/experiments/suite/congestion.yaml, {ROOT}/experiments/suite/seq-warmup.yaml]
train_instances: {{first: 1000, count: 4}}
test_instances: {{first: 0, count: 3}}
agents: [replan]
training_seeds: 3
train_steps: 20000
train_envs: 2
"""
PASS = dict(instances=2, train_steps=256, training_seeds=2)
TIMEOUT = 300  # no run here needs a tenth of it; a hang fails instead of blocking CI


@pytest.fixture(scope="module")
def exe():
    path = cli()
    assert path, "no shardgym CLI: set SHARDGYM_BINARY_DIR to a build (ctest does)"
    return path


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    path = tmp_path_factory.mktemp("suite") / "suite.yaml"
    path.write_text(SUITE)
    return path


@pytest.fixture(scope="module")
def agents():
    import shardgym
    # A learner where this build has one (LibTorch builds): its training seeds and steps
    # are passed on and its seeds pooled in the merge.
    return ["replan", "ppo" if "ppo" in shardgym.agent_names() else "atp"]


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray for the module (run_suite uses a Ray this process has initialised)."""
    ray, started, where = distributed.start_ray(None, num_cpus=2)
    assert started and "127.0.0.1:" in where, where
    assert ray.util.get_node_ip_address() == "127.0.0.1"
    yield ray
    ray.shutdown()


def test_merged_table_equals_one_run(exe, suite, agents, local_ray, tmp_path):
    t0 = time.monotonic()
    single_json = tmp_path / "single.json"
    single = subprocess.run(
        [exe, "suite", str(suite), "--agents", ",".join(agents), "--markdown",
         "--out", str(single_json), *distributed.passthrough_args(**PASS)],
        capture_output=True, text=True, timeout=TIMEOUT)
    assert single.returncode == 0, single.stderr
    single_s = time.monotonic() - t0

    said = []
    t0 = time.monotonic()
    run = distributed.run_suite(suite, agents, cli=exe, timeout=TIMEOUT, say=said.append,
                                cells_dir=tmp_path / "cells", **PASS)
    ray_s = time.monotonic() - t0
    print(f"\none run: {single_s:.1f} s; on Ray ({len(run.cells)} cells, Ray already up): "
          f"{ray_s:.1f} s\n" + "\n".join(said))

    # One cell per task for the references and one per task and agent, each reported.
    assert [c.cell.name for c in run.cells] == [
        f"{t}/{a}" for t in ("congestion", "seq-warmup") for a in ["references", *agents]]
    assert sum(line.startswith("[") for line in said) == len(run.cells)
    assert sorted(p.name for p in (tmp_path / "cells").iterdir()) == \
        sorted(c.path.name for c in run.cells)

    # The JSON: exactly the single run's as the CLI reads it back (a merge recomputes the
    # rows from the episodes, which the JSON holds to 6 decimals), wall times aside.
    merged = json.loads(run.json)
    again = json.loads(distributed.merge(exe, [single_json], "json"))
    assert distributed.without_wall_times(merged) == distributed.without_wall_times(again)
    # Per task: the references (3) and replan on 2 instances; ppo 2 seeds x 2, atp 1 x 2.
    assert len(merged["episodes"]) == 2 * (4 * 2 + (2 * 2 if "ppo" in agents else 2))
    if "ppo" in agents:
        ppo = [r for r in merged["runs"] if r["agent"] == "ppo"]
        assert {(r["task"], r["training_seed"]) for r in ppo} == \
            {(t, s) for t in ("congestion", "seq-warmup") for s in (0, 1)}
        assert all(256 <= r["train_env_steps"] < 1000 for r in ppo)  # not the suite's 20000

    # The markdown table: the single run's as printed, but for the wall-time columns.
    def figures(markdown):
        rows = []
        for line in markdown.splitlines():
            cells = line.split("|")
            if len(cells) == 13 and cells[1].strip() not in ("task", "---"):
                del cells[9:11]  # "train s", "eval s"
            rows.append("|".join(cells))
        return rows

    assert "| train s | eval s |" in run.markdown
    assert figures(run.markdown) == figures(single.stdout)
    assert "overall" in run.text and run.text.startswith("suite small:")


def test_bad_input_is_refused_before_ray(exe, suite, tmp_path):
    with pytest.raises(distributed.BadInput, match="no suite file"):
        distributed.run_suite(tmp_path / "missing.yaml", cli=exe)
    with pytest.raises(distributed.BadInput, match="unknown agent 'nosuch'"):
        distributed.run_suite(suite, ["replan", "nosuch"], cli=exe)
    with pytest.raises(distributed.BadInput, match="no task 'nope'.*congestion, seq-warmup"):
        distributed.run_suite(suite, tasks=["nope"], cli=exe)
    with pytest.raises(distributed.BadInput, match="cannot reach 127.0.0.1:1"):
        distributed.run_suite(suite, address="127.0.0.1:1", cli=exe)
    with pytest.raises(distributed.BadInput, match="--num-cpus sizes a local Ray only"):
        distributed.run_suite(suite, address="ray://127.0.0.1:1", num_cpus=2, cli=exe)
    (tmp_path / "not-suite.yaml").write_text("name: x\n")
    with pytest.raises(distributed.BadInput, match="not a suite file"):
        distributed.run_suite(tmp_path / "not-suite.yaml", cli=exe)
    # The command line: exit 2 and the reason.
    proc = subprocess.run([sys.executable, "-m", "shardgym.distributed", "suite",
                           str(tmp_path / "missing.yaml"), "--cli", exe],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "no suite file" in proc.stderr, proc.stderr
    help_text = subprocess.run([sys.executable, "-m", "shardgym.distributed",
                                "suite", "--help"], capture_output=True, text=True,
                               timeout=60).stdout
    for flag in ("--address", "--num-cpus", "--instances", "--train-steps",
                 "--training-seeds", "--bootstrap-seed", "--timeout", "--ship"):
        assert flag in help_text


def test_staged_suite_loads_from_its_copy(exe, suite, tmp_path):
    """What --address ships (runtime_env working_dir): the suite, its tasks and the file
    they include, the suite listing its tasks relative to itself; the CLI loads that copy."""
    spec = distributed.read_suite(str(suite))
    assert {os.path.basename(f) for f in spec.files} == \
        {"suite.yaml", "congestion.yaml", "seq-warmup.yaml", "hardware.yaml"}
    rel = distributed.stage(spec, tmp_path / "ship")
    copy = tmp_path / "ship" / rel
    assert not any(os.path.isabs(t) for t in distributed._yaml_load(str(copy))["tasks"])
    distributed.check_with_cli(exe, str(copy), ["congestion", "seq-warmup"], ["replan"], [])


def test_the_cell_needs_no_shardgym_package_on_the_worker(tmp_path):
    """The cell function travels pickled by value: a Python with Ray but without this
    package (no PYTHONPATH) runs it, and it reports a node without the CLI."""
    import ray.cloudpickle as cloudpickle
    cloudpickle.register_pickle_by_value(distributed)
    try:
        blob = cloudpickle.dumps(distributed._run_cell)
    finally:
        cloudpickle.unregister_pickle_by_value(distributed)
    code = ("import pickle, sys; f = pickle.loads(sys.stdin.buffer.read()); "
            "import json; print(json.dumps(f('/no/such/shardgym', ['suite'], None, 5, 100))); "
            "assert 'shardgym' not in sys.modules")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = "/usr/bin:/bin"  # no shardgym CLI on it
    proc = subprocess.run([sys.executable, "-c", code], input=blob, capture_output=True,
                          env=env, cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    result = json.loads(proc.stdout)
    assert not result["ok"] and "no shardgym CLI on" in result["error"], result


def _fake_cli(tmp_path, exe, on_cell):
    """A CLI that is the real one except for cells (the runs given --out)."""
    path = tmp_path / "shardgym"
    path.write_text(f'#!/bin/sh\ncase " $* " in *" --out "*) {on_cell} ;; esac\n'
                    f'exec "{exe}" "$@"\n')
    path.chmod(0o755)
    return str(path)


def test_a_failing_cell_ends_the_run_with_its_stderr(exe, suite, local_ray, tmp_path):
    fake = _fake_cli(tmp_path, exe, 'echo "cell refused: $*" >&2; exit 3')
    with pytest.raises(distributed.DistributedError) as e:
        distributed.run_suite(suite, ["atp"], tasks=["congestion"], cli=fake, timeout=TIMEOUT,
                              say=None, **PASS)
    message = str(e.value)
    assert "cell congestion/" in message and "(exit 3)" in message, message
    assert "cell refused: suite" in message and "--tasks congestion" in message, message


def test_a_cell_past_the_timeout_is_stopped(exe, suite, local_ray, tmp_path):
    pid_file = tmp_path / "pid"
    fake = _fake_cli(tmp_path, exe, f'echo $$ > "{pid_file}"; exec sleep 120')
    t0 = time.monotonic()
    with pytest.raises(distributed.DistributedError, match="timed out after 4 s"):
        distributed.run_suite(suite, [], tasks=["congestion"], cli=fake, timeout=4, say=None,
                              **PASS)
    assert time.monotonic() - t0 < 60
    # The CLI process of the cell does not outlive it.
    pid = int(pid_file.read_text())
    for _ in range(300):  # 30 s: a loaded machine is slow to reap it
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the timed-out cell's process {pid} still runs")
