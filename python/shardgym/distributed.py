"""A task suite (`shardgym suite`, docs/suite.md) run as Ray tasks: on a laptop, on a local Ray
cluster, or on a real cluster by address; the results merged into the same tables.

    python -m shardgym.distributed suite experiments/suite.yaml --agents replan,atp \\
        --out runs/suite.json --markdown                      # a local Ray on 127.0.0.1
    python -m shardgym.distributed suite experiments/suite.yaml --agents replan,atp \\
        --address ray://head:10001 --out runs/suite.json      # a running cluster

The suite is split into cells, each one `shardgym suite` process (the CLI, as a subprocess
of a Ray task): per task, the references (megatron, hindsight-static, dynamic-oracle) as one
cell, and each other agent as its own cell (`--tasks T --agents A --no-references`; a
learning agent's training seeds stay in its cell, since the CLI has no option to run one
seed of several). Each cell writes its JSON into a temporary folder of the worker and
returns it as text; the driver writes the texts into one folder and merges them with
`shardgym suite --from-json`, in the suite's order of tasks and agents, which is the table a
single `shardgym suite` run prints (every figure but the wall times).

Where things must be:
- **Ray** on the driver and every node, the same version (python/requirements.txt) and the
  same Python minor version (the cell function travels pickled by value: the workers do not
  need the `shardgym` package). `ray://` addresses need `ray[client]`.
- **The shardgym CLI** on every node: at the path the driver uses (--cli, else
  $SHARDGYM_BINARY_DIR/experiments/shardgym, else `shardgym` on PATH, else the source
  checkout's build/experiments/shardgym), or else as `shardgym` on the node's PATH. A node
  with neither fails its cell with that message.
- **The suite files.** On a local Ray they are read where they are. With --address, the
  suite file, its tasks and every file they name by a relative path (`include:`,
  calibration files) are copied into a staging folder, which goes to the workers as Ray's
  runtime_env `working_dir` (the cells run inside it); the suite file there lists its tasks
  by relative paths. Absolute paths inside task files are read as they are, on the node.
  --no-ship uses the paths as given instead, for clusters with a shared file system.
- **Token authentication** (on by default in Ray 2.60): RAY_AUTH_MODE=token and the
  cluster's token (RAY_AUTH_TOKEN or ~/.ray/auth_token) on the driver's machine.

Without --address, a Ray instance is started for this run only, on 127.0.0.1 (every Ray
server of it listens on the loopback interface, which is checked before anything runs) and
is stopped at the end. A cell that fails ends the run with its command and stderr; nothing
waits longer than --timeout.

Exit codes as the CLI's: 0 ok, 1 a cell or Ray failed, 2 bad input.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from shardgym.ray_session import BadInput, DistributedError, start_ray  # noqa: F401

REFERENCES = ("megatron", "hindsight-static", "dynamic-oracle")
# Keys of the suite JSON that hold wall-clock times (differ between runs of the same cells).
WALL_KEYS = ("wall_s", "train_wall_s", "eval_wall_s")
DEFAULT_TIMEOUT_S = 24 * 3600.0
# How long a heartbeat waits for a finished cell before saying which are still running.
HEARTBEAT_S = 600.0
STDERR_TAIL = 6000  # characters of a failed cell's stderr in the error


@dataclasses.dataclass(frozen=True)
class Task:
    name: str   # the experiment's `name` (else its file's stem), as --tasks takes it
    path: str   # absolute


@dataclasses.dataclass
class Suite:
    path: str                      # absolute
    data: Dict[str, Any]           # the suite file as parsed
    tasks: List[Task]
    agents: List[str]              # the suite's default agents
    files: List[str]               # every file a cell reads (suite, tasks, what they name)


@dataclasses.dataclass(frozen=True)
class Cell:
    """One `shardgym suite` process: the references of a task, or one agent on a task."""

    index: int
    task: str
    agent: Optional[str]  # None: the references

    @property
    def name(self) -> str:
        return f"{self.task}/{self.agent or 'references'}"

    @property
    def file_name(self) -> str:
        safe = re.sub(r"[^A-Za-z0-9_.=-]+", "_", self.agent or "references")
        return f"{self.index:03d}-{self.task}-{safe}.json"

    def args(self, suite: str, passthrough: Sequence[str]) -> List[str]:
        """The CLI's arguments after `shardgym`, without --out."""
        # With references on, `--agents megatron` runs the three references and nothing else
        # (an agent id that is a reference is not run twice).
        agent = ["--agents", "megatron"] if self.agent is None else \
            ["--agents", self.agent, "--no-references"]
        return ["suite", suite, "--tasks", self.task, *agent, *passthrough]


@dataclasses.dataclass
class CellResult:
    cell: Cell
    seconds: float
    host: str
    path: pathlib.Path  # its JSON on the driver


@dataclasses.dataclass
class SuiteRun:
    """What run_suite gives: the merged JSON (text), the tables, and each cell's timing."""

    json: str
    markdown: str
    text: str
    cells: List[CellResult]
    wall_s: float
    cells_dir: Optional[pathlib.Path]  # None when the cells' JSONs were not kept


# ---------------------------------------------------------------------------------------------
# Input: the suite, its agents, the CLI


def split_agents(text: str) -> List[str]:
    """Comma-separated agent ids, commas inside parentheses kept ("ppo(lr=3e-4,clip=0.2)"),
    as the CLI splits --agents."""
    out, item, depth = [], "", 0
    for c in text:
        depth += (c == "(") - (c == ")")
        if c == "," and depth == 0:
            if item.strip():
                out.append(item.strip())
            item = ""
        else:
            item += c
    if item.strip():
        out.append(item.strip())
    return out


def _yaml_load(path: str) -> Any:
    import yaml
    try:
        with open(path, encoding="utf-8") as f:
            return yaml.safe_load(f)
    except OSError as e:
        raise BadInput(f"{path}: cannot read: {e}") from e
    except yaml.YAMLError as e:
        raise BadInput(f"{path}: not YAML: {e}") from e


def _strings(node: Any):
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for v in node.values():
            yield from _strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from _strings(v)


def _named_files(config: str, seen: set) -> None:
    """Adds `config` and, recursively, every existing file it names by a relative path."""
    config = os.path.abspath(config)
    if config in seen:
        return
    seen.add(config)
    if not config.endswith((".yaml", ".yml", ".json")):
        return
    data = _yaml_load(config)
    base = os.path.dirname(config)
    for s in _strings(data):
        if len(s) > 4096 or "\n" in s or os.path.isabs(s):
            continue
        candidate = os.path.join(base, s)
        if os.path.isfile(candidate):
            _named_files(candidate, seen)


def read_suite(path: str) -> Suite:
    """The suite file's tasks (names as the CLI gives them), default agents and files. The
    CLI checks everything else (check_with_cli)."""
    if not os.path.isfile(path):
        raise BadInput(f"no suite file {path!r}")
    path = os.path.abspath(path)
    data = _yaml_load(path)
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), list) or \
            not data["tasks"]:
        raise BadInput(f"{path}: not a suite file (no `tasks:` list; docs/suite.md)")
    tasks: List[Task] = []
    seen: set = {path}
    for entry in data["tasks"]:
        if not isinstance(entry, str):
            raise BadInput(f"{path}: tasks: {entry!r} is not a path")
        full = entry if os.path.isabs(entry) else os.path.join(os.path.dirname(path), entry)
        full = os.path.abspath(full)
        if not os.path.isfile(full):
            raise BadInput(f"{path}: task {entry!r}: no file {full}")
        config = _yaml_load(full)
        name = config.get("name") if isinstance(config, dict) else None
        tasks.append(Task(str(name) if name else pathlib.Path(full).stem, full))
        _named_files(full, seen)
    names = [t.name for t in tasks]
    if len(set(names)) != len(names):
        raise BadInput(f"{path}: two tasks have the same name ({', '.join(names)}); their runs "
                       "could not be told apart")
    agents = data.get("agents") or []
    if not isinstance(agents, list):
        raise BadInput(f"{path}: agents: not a list")
    return Suite(path, data, tasks, [str(a) for a in agents], sorted(seen))


def find_cli(cli: Optional[str] = None) -> str:
    """The shardgym CLI the driver runs (see the module docstring for the order)."""
    candidates = []
    if cli:
        candidates.append(cli)
    else:
        binary = os.environ.get("SHARDGYM_BINARY_DIR")
        if binary:
            candidates.append(os.path.join(binary, "experiments", "shardgym"))
        found = shutil.which("shardgym")
        if found:
            candidates.append(found)
        candidates.append(str(pathlib.Path(__file__).resolve().parents[2] /
                              "build" / "experiments" / "shardgym"))
    for c in candidates:
        c = shutil.which(c) or c
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.abspath(c)
    raise BadInput("no shardgym CLI: tried " + ", ".join(candidates) +
                   " (build it with scripts/build.sh, or pass --cli PATH)")


def check_with_cli(cli: str, suite: str, tasks: Sequence[str], agents: Sequence[str],
                   passthrough: Sequence[str], timeout: float = 120.0) -> None:
    """Lets the CLI check the suite file, the task names, the agent ids and the options
    before any cell starts, without running anything: `suite ... --no-references` without
    --out is refused (exit 2) only after those checks (experiments/cli/commands_suite.cpp),
    so that refusal means they passed, and any other refusal is the reason to stop."""
    try:
        help_text = subprocess.run([cli, "suite", "--help"], capture_output=True, text=True,
                                   timeout=timeout).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BadInput(f"{cli} suite --help: {e}") from e
    if "--tasks" not in help_text:
        raise BadInput(f"{cli} has no `suite --tasks` (built before it): rebuild the CLI")
    cmd = [cli, "suite", suite, "--tasks", ",".join(tasks),
           "--agents", ",".join(agents) or "megatron", "--no-references", *passthrough]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise DistributedError(f"checking the suite with the CLI took over {timeout:.0f} s: "
                               f"{' '.join(cmd)}") from e
    if proc.returncode == 2 and "--no-references: give --out" in proc.stderr:
        return
    if proc.returncode != 0:
        raise BadInput(proc.stderr.strip() or f"{' '.join(cmd)}: exit {proc.returncode}")
    raise DistributedError(f"{' '.join(cmd)} ran instead of stopping at its checks; this "
                           "CLI's `suite` is not the one shardgym.distributed knows")


def plan_cells(tasks: Sequence[Task], agents: Sequence[str]) -> List[Cell]:
    """Per task in the suite's order: the references, then each agent that is not one."""
    others = [a for a in dict.fromkeys(agents) if a not in REFERENCES]
    cells: List[Cell] = []
    for t in tasks:
        for agent in [None, *others]:
            cells.append(Cell(len(cells), t.name, agent))
    return cells


def stage(suite: Suite, into: pathlib.Path) -> str:
    """Copies the suite's files into `into` with their layout (relative to their common
    folder) and writes the suite file there with its tasks as relative paths; returns the
    suite file's path relative to `into`."""
    import yaml
    root = os.path.commonpath([os.path.dirname(f) for f in suite.files])
    for f in suite.files:
        dest = into / os.path.relpath(f, root)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, dest)
    staged_suite = into / os.path.relpath(suite.path, root)
    data = dict(suite.data)
    data["tasks"] = [os.path.relpath(t.path, os.path.dirname(suite.path)) for t in suite.tasks]
    staged_suite.write_text(
        "# A copy of " + suite.path + " with its tasks as relative paths (shardgym.distributed)\n"
        + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return os.path.relpath(staged_suite, into)


# ---------------------------------------------------------------------------------------------
# The cell, as it runs on a worker: standard library only (pickled by value, so the workers
# need neither this package nor its extension).


def _run_cell(cli: str, args: List[str], cwd: Optional[str], timeout: float,
              stderr_tail: int) -> Dict[str, Any]:
    import os
    import shutil
    import signal
    import socket
    import subprocess
    import sys
    import tempfile
    import time

    host = socket.gethostname()
    exe = cli if os.path.isfile(cli) and os.access(cli, os.X_OK) else shutil.which("shardgym")
    if exe is None:
        return {"ok": False, "host": host, "cmd": ["shardgym", *args], "returncode": None,
                "stderr": "", "error": f"no shardgym CLI on {host}: neither {cli} nor "
                                       "`shardgym` on PATH"}

    # A worker killed by Ray (a shutdown after a failure) takes its CLI process along: on
    # Linux the child asks for SIGKILL when its parent dies (PR_SET_PDEATHSIG = 1). prctl is
    # looked up before the fork, so the child only makes the call.
    die_with_parent = None
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            prctl = ctypes.CDLL(None, use_errno=True).prctl

            def die_with_parent():
                prctl(1, signal.SIGKILL)
        except (OSError, AttributeError):
            pass

    with tempfile.TemporaryDirectory(prefix="shardgym-cell-") as tmp:
        out = os.path.join(tmp, "cell.json")
        cmd = [exe, *args, "--out", out]
        t0 = time.monotonic()
        try:
            # On cancellation Ray raises in this thread: subprocess.run then kills the CLI.
            proc = subprocess.run(cmd, cwd=cwd or None, capture_output=True, text=True,
                                  timeout=timeout, preexec_fn=die_with_parent)
        except subprocess.TimeoutExpired as e:
            err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else \
                (e.stderr or "")
            return {"ok": False, "host": host, "cmd": cmd, "returncode": None,
                    "stderr": err[-stderr_tail:], "error": f"timed out after {timeout:.0f} s"}
        seconds = time.monotonic() - t0
        if proc.returncode != 0 or not os.path.isfile(out):
            return {"ok": False, "host": host, "cmd": cmd, "returncode": proc.returncode,
                    "stderr": proc.stderr[-stderr_tail:],
                    "error": f"exit {proc.returncode}" if proc.returncode else f"no {out}"}
        with open(out, encoding="utf-8") as f:
            return {"ok": True, "host": host, "cmd": cmd, "json": f.read(), "seconds": seconds}


def _stderr_say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run_cells(cells: Sequence[Cell], cli: str, suite_arg: str, passthrough: Sequence[str],
              out_dir: pathlib.Path, *, ray, working_dir: Optional[str], cpus_per_cell: float,
              timeout: float, say: Callable[[str], None]) -> List[CellResult]:
    """Runs the cells as Ray tasks, writes each one's JSON into out_dir as it comes back, and
    returns them in the cells' order. The first failure cancels the others and raises.
    working_dir: the folder start_ray shipped (the cells run in it), or None."""
    import ray.cloudpickle as cloudpickle
    # The cell function travels by value (the workers need no shardgym package).
    module = sys.modules[_run_cell.__module__]
    if module.__name__ != "__main__":
        cloudpickle.register_pickle_by_value(module)
    try:
        remote = ray.remote(_run_cell).options(num_cpus=cpus_per_cell, max_retries=0)
        # Shipped files: the job's working_dir is the tasks' cwd; else the driver's cwd.
        cwd = None if working_dir else os.getcwd()
        pending = {remote.remote(cli, c.args(suite_arg, passthrough), cwd, timeout,
                                 STDERR_TAIL): c for c in cells}
    except Exception as e:
        raise DistributedError(f"Ray refused the cells: {type(e).__name__}: {e}") from e
    finally:
        if module.__name__ != "__main__":
            cloudpickle.unregister_pickle_by_value(module)
    total, results = len(cells), {}
    start = time.monotonic()
    deadline = start + timeout
    last_news = start

    def fail(message: str):
        for ref in pending:
            ray.cancel(ref)
        raise DistributedError(message)

    while pending:
        now = time.monotonic()
        if now >= deadline:
            fail(f"timed out after {timeout:.0f} s (--timeout) with {len(pending)} cells "
                 f"unfinished: {', '.join(c.name for c in pending.values())}")
        ready, _ = ray.wait(list(pending), num_returns=1,
                            timeout=min(deadline - now, HEARTBEAT_S))
        if not ready:
            if time.monotonic() - last_news >= HEARTBEAT_S:
                say(f"... {time.monotonic() - start:.0f} s, not finished yet: "
                    f"{', '.join(c.name for c in pending.values())}")
                last_news = time.monotonic()
            continue
        ref = ready[0]
        cell = pending.pop(ref)
        try:
            r = ray.get(ref, timeout=60)
        except Exception as e:  # the worker died, the runtime env failed, ...
            fail(f"cell {cell.name}: Ray could not run it: {type(e).__name__}: {e}")
        if not r["ok"]:
            fail(f"cell {cell.name} failed on {r['host']} ({r['error']}): "
                 f"{' '.join(r['cmd'])}\n--- its stderr (last {STDERR_TAIL} characters) ---\n"
                 f"{r['stderr'].rstrip()}")
        path = out_dir / cell.file_name
        path.write_text(r["json"], encoding="utf-8")
        results[cell.index] = CellResult(cell, r["seconds"], r["host"], path)
        last_news = time.monotonic()
        say(f"[{len(results)}/{total}] {cell.name}: {r['seconds']:.1f} s on {r['host']} "
            f"({last_news - start:.0f} s since the start)")
    return [results[c.index] for c in cells]


# ---------------------------------------------------------------------------------------------
# The merge and the whole run


def merge(cli: str, paths: Sequence[os.PathLike], fmt: str = "json",
          bootstrap_seed: Optional[int] = None, timeout: float = 600.0) -> str:
    """`shardgym suite --from-json PATHS` as "json", "markdown" or "text"."""
    cmd = [cli, "suite", "--from-json", *map(str, paths)]
    if fmt in ("json", "markdown"):
        cmd.append("--" + fmt)
    if bootstrap_seed is not None:
        cmd += ["--bootstrap-seed", str(bootstrap_seed)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise DistributedError(f"merging the cells failed: {' '.join(cmd)}\n{proc.stderr}")
    return proc.stdout


def passthrough_args(instances: Optional[int] = None, train_steps: Optional[int] = None,
                     training_seeds: Optional[int] = None,
                     bootstrap_seed: Optional[int] = None) -> List[str]:
    args = []
    for flag, value in (("--instances", instances), ("--train-steps", train_steps),
                        ("--training-seeds", training_seeds),
                        ("--bootstrap-seed", bootstrap_seed)):
        if value is not None:
            args += [flag, str(value)]
    return args


def run_suite(suite: os.PathLike, agents: Optional[Sequence[str]] = None, *,
              tasks: Optional[Sequence[str]] = None, address: Optional[str] = None,
              num_cpus: Optional[int] = None, cpus_per_cell: float = 1,
              instances: Optional[int] = None, train_steps: Optional[int] = None,
              training_seeds: Optional[int] = None, bootstrap_seed: Optional[int] = None,
              cli: Optional[str] = None, ship: Optional[bool] = None,
              timeout: float = DEFAULT_TIMEOUT_S, cells_dir: Optional[os.PathLike] = None,
              say: Optional[Callable[[str], None]] = _stderr_say) -> SuiteRun:
    """Runs `shardgym suite SUITE` as Ray tasks and merges the cells (module docstring).

    agents: agent ids (default: the suite's `agents`); tasks: task names (default: all);
    address: None or "local" (a Ray on 127.0.0.1 for this call; num_cpus its size), "auto",
    "host:port" or "ray://host:port"; ship: send the suite's files as runtime_env working_dir
    (default: with an address); cells_dir: keep each cell's JSON there (default: a temporary
    folder, removed). Raises BadInput or DistributedError."""
    say = say or (lambda line: None)
    if timeout <= 0:
        raise BadInput("timeout: must be positive")
    if cpus_per_cell <= 0:
        raise BadInput("cpus_per_cell: must be positive")
    if num_cpus is not None and num_cpus < 1:
        raise BadInput("num_cpus: at least 1")
    t0 = time.monotonic()
    spec = read_suite(os.fspath(suite))
    exe = find_cli(cli)
    agent_ids = list(agents) if agents is not None else list(spec.agents)
    chosen = list(spec.tasks)
    if tasks:
        known = {t.name: t for t in spec.tasks}
        unknown = [n for n in tasks if n not in known]
        if unknown:
            raise BadInput(f"--tasks: no task {unknown[0]!r} in {spec.path} (it has: "
                           f"{', '.join(known)})")
        chosen = [t for t in spec.tasks if t.name in set(tasks)]
    passthrough = passthrough_args(instances, train_steps, training_seeds, bootstrap_seed)
    check_with_cli(exe, spec.path, [t.name for t in chosen], agent_ids, passthrough)
    cells = plan_cells(chosen, agent_ids)
    ship = address not in (None, "local") if ship is None else ship

    with tempfile.TemporaryDirectory(prefix="shardgym-distributed-") as tmp:
        out_dir = pathlib.Path(cells_dir) if cells_dir is not None else pathlib.Path(tmp, "cells")
        out_dir.mkdir(parents=True, exist_ok=True)
        suite_arg, working_dir = spec.path, None
        if ship:
            working_dir = os.path.join(tmp, "ship")
            suite_arg = stage(spec, pathlib.Path(working_dir))
        ray, started, where = start_ray(address, num_cpus, working_dir)
        try:
            say(f"{len(cells)} cells ({len(chosen)} tasks x (references + "
                f"{len(cells) // len(chosen) - 1} agents)) on {where}"
                + (f"; suite files shipped from {working_dir}" if ship else ""))
            results = run_cells(cells, exe, suite_arg, passthrough, out_dir, ray=ray,
                                working_dir=working_dir, cpus_per_cell=cpus_per_cell,
                                timeout=timeout, say=say)
        finally:
            if started:
                ray.shutdown()
        paths = [r.path for r in results]
        merged = SuiteRun(json=merge(exe, paths, "json", bootstrap_seed),
                          markdown=merge(exe, paths, "markdown", bootstrap_seed),
                          text=merge(exe, paths, "text", bootstrap_seed), cells=results,
                          wall_s=time.monotonic() - t0,
                          cells_dir=pathlib.Path(cells_dir) if cells_dir is not None else None)
    say(f"merged {len(cells)} cells in {merged.wall_s:.1f} s")
    return merged


def without_wall_times(node: Any) -> Any:
    """A suite JSON (parsed) without its wall-clock keys: what two runs of the same cells
    share."""
    if isinstance(node, dict):
        return {k: without_wall_times(v) for k, v in node.items() if k not in WALL_KEYS}
    if isinstance(node, list):
        return [without_wall_times(v) for v in node]
    return node


# ---------------------------------------------------------------------------------------------
# CLI




def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: at least 1")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text}: must be positive")
    return value


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m shardgym.distributed", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("suite", formatter_class=argparse.RawDescriptionHelpFormatter,
                       help="run `shardgym suite` as Ray tasks and merge the tables",
                       description=__doc__)
    s.add_argument("suite", help="suite file (YAML)")
    s.add_argument("--agents", help="comma-separated agent ids (default: the suite's `agents`)")
    s.add_argument("--tasks", help="comma-separated task names to run (default: all)")
    s.add_argument("--address", help="Ray to use: none or 'local' starts one on 127.0.0.1 for "
                   "this run; 'auto' joins the cluster this machine is part of; 'host:port' its "
                   "GCS; 'ray://host:port' a Ray Client server (needs ray[client])")
    s.add_argument("--num-cpus", type=_positive_int,
                   help="CPUs of the local Ray (default: this machine's); not with --address")
    s.add_argument("--cpus-per-cell", type=_positive_float, default=1.0,
                   help="CPUs Ray reserves per cell (default 1)")
    s.add_argument("--instances", type=_positive_int,
                   help="passed on: the first N test instances only")
    s.add_argument("--train-steps", type=int, help="passed on: env steps per learner, task, seed")
    s.add_argument("--training-seeds", type=_positive_int,
                   help="passed on: training seeds per learning agent")
    s.add_argument("--bootstrap-seed", type=int, help="passed on (and to the merge)")
    s.add_argument("--cli", help="the shardgym CLI (default: $SHARDGYM_BINARY_DIR/experiments/"
                   "shardgym, `shardgym` on PATH, or the checkout's build/experiments/shardgym); "
                   "workers use this path where it exists, else `shardgym` on their PATH")
    s.add_argument("--ship", action=argparse.BooleanOptionalAction, default=None,
                   help="send the suite's files to the workers as runtime_env working_dir "
                   "(default: with --address); --no-ship: every node reads them at the paths "
                   "given (a shared file system)")
    s.add_argument("--timeout", type=_positive_float, default=DEFAULT_TIMEOUT_S,
                   help="seconds the whole run may take (default 86400); then the cells "
                   "are cancelled and the run fails")
    s.add_argument("--cells-dir", help="keep each cell's JSON in this folder (merge them again "
                   "with `shardgym suite --from-json`)")
    s.add_argument("--out", help="write the merged JSON to this file")
    fmt = s.add_mutually_exclusive_group()
    fmt.add_argument("--markdown", action="store_true", help="print markdown tables")
    fmt.add_argument("--json", action="store_true", help="print the merged JSON")
    return p.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if args.train_steps is not None and args.train_steps < 0:
        print("error: --train-steps: at least 0", file=sys.stderr)
        return 2
    try:
        # An empty --agents means the suite's agents, as for the CLI.
        run = run_suite(args.suite, split_agents(args.agents) if args.agents else None,
                        tasks=split_agents(args.tasks) if args.tasks else None,
                        address=args.address, num_cpus=args.num_cpus,
                        cpus_per_cell=args.cpus_per_cell, instances=args.instances,
                        train_steps=args.train_steps, training_seeds=args.training_seeds,
                        bootstrap_seed=args.bootstrap_seed, cli=args.cli, ship=args.ship,
                        timeout=args.timeout, cells_dir=args.cells_dir)
    except DistributedError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    if args.out:
        pathlib.Path(args.out).write_text(run.json, encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)
    sys.stdout.write(run.json if args.json else run.markdown if args.markdown else run.text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
