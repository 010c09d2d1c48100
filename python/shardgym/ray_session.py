"""Connecting to Ray for `shardgym.distributed`: a Ray started for one run on 127.0.0.1 (every
server of it on the loopback interface, checked), or a running cluster by address (refused at
once when nothing answers there), and the errors `shardgym.distributed` reports, with their
exit codes. `shardgym.distributed`'s docstring says where things must be.
"""
from __future__ import annotations

import contextlib
import os
import socket
from typing import Optional


class DistributedError(Exception):
    """A cell failed, Ray failed or timed out (exit code 1)."""

    exit_code = 1


class BadInput(DistributedError):
    """A bad suite, agent, address or option (exit code 2)."""

    exit_code = 2


def _import_ray():
    try:
        import ray
    except ImportError as e:
        raise BadInput("Ray is not installed: .venv/bin/pip install 'ray[client]==2.60.0' "
                       "(python/requirements.txt)") from e
    return ray


def _probe(address: str, timeout: float = 10.0) -> None:
    """A GCS (host:port) or Ray Client (ray://host:port) address that accepts no TCP
    connection is refused at once (ray.init would wait minutes on it)."""
    bare = address[len("ray://"):] if address.startswith("ray://") else address
    host, sep, port = bare.rpartition(":")
    if not sep or not port.isdigit():
        raise BadInput(f"--address {address!r}: expected auto, local, host:port or "
                       "ray://host:port")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as e:
        raise BadInput(f"--address {address}: cannot reach {host}:{port} ({e}); is a Ray "
                       "cluster running there (ray start --head ...)?") from e


def _loopback(host: str) -> bool:
    return host.startswith("127.") or host in ("::1", "[::1]", "localhost")


# Attempts (about 40 s each) ray.init makes to reach a cluster's GCS; Ray's default retries
# for many minutes when the address answers but is no GCS, or one Ray cannot use.
CONNECT_ATTEMPTS = 2


@contextlib.contextmanager
def _ray_settings(loopback: bool, connect_attempts: Optional[int] = None):
    """Ray's settings for one ray.init, restored after.

    loopback: Ray picks the node's routable address as the node IP (and turns 127.0.0.1 into
    it) unless it treats the machine as a single-node, non-cluster setup, as it does by
    default on macOS and Windows; then it binds its servers to, and connects over, the
    loopback interface. The switch is read at `import ray` and by the servers it starts:
    set for both. connect_attempts: RAY_gcs_server_port_wait_time_s, unless already set."""
    from ray._private import ray_constants
    env = {}
    if loopback:
        env[ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR] = "0"
    if connect_attempts and "RAY_gcs_server_port_wait_time_s" not in os.environ:
        env["RAY_gcs_server_port_wait_time_s"] = str(connect_attempts)
    saved_env = {k: os.environ.get(k) for k in env}
    saved = ray_constants.ENABLE_RAY_CLUSTER
    os.environ.update(env)
    if loopback:
        ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _auto_address() -> Optional[str]:
    """The address `auto` stands for (RAY_ADDRESS, else the cluster `ray start` recorded on
    this machine), or None."""
    try:
        from ray._private.services import get_ray_address_from_environment
        return get_ray_address_from_environment("auto", None)
    except Exception:  # no cluster; ray.init says so
        return None


def start_ray(address: Optional[str], num_cpus: Optional[int],
              working_dir: Optional[str] = None):
    """Connects to Ray (see the module docstring); returns (ray, started_here, description).
    working_dir: a local folder every task of this job runs in (Ray uploads it; only the
    job's runtime_env takes a local path, a task's needs a URI)."""
    ray = _import_ray()
    import logging
    runtime_env = {"working_dir": working_dir} if working_dir else None
    local = address in (None, "local")
    target = _auto_address() if address == "auto" else address
    if not local:
        if num_cpus is not None:
            raise BadInput("--num-cpus sizes a local Ray only; a cluster has its own CPUs")
        if target:
            _probe(target)
    if ray.is_initialized():
        if not local or working_dir:
            raise BadInput("Ray is already initialised in this process: call without an "
                           "address and without shipping (ship=False), or shut it down first")
        return ray, False, "the Ray this process had initialised"
    if local:
        with _ray_settings(loopback=True):
            ray.init(address="local", num_cpus=num_cpus, include_dashboard=False,
                     _node_ip_address="127.0.0.1", logging_level=logging.WARNING,
                     log_to_driver=False, runtime_env=runtime_env)
        ip = ray.util.get_node_ip_address()
        gcs = ray.get_runtime_context().gcs_address
        if not (_loopback(ip) and _loopback(gcs.rpartition(":")[0])):
            ray.shutdown()
            raise DistributedError(f"the local Ray came up on {ip} (GCS {gcs}), not on the "
                                   "loopback interface; refusing to run (this Ray version "
                                   "binds otherwise than shardgym.distributed expects)")
        cpus = int(ray.cluster_resources().get("CPU", 0))
        return ray, True, f"a local Ray on {gcs} with {cpus} CPUs"
    # A cluster on this machine's loopback interface (`ray start --head --node-ip-address
    # 127.0.0.1`) is reached as such; Ray would otherwise dial the routable address.
    host = (target or "").removeprefix("ray://").rpartition(":")[0]
    try:
        with _ray_settings(loopback=_loopback(host), connect_attempts=CONNECT_ATTEMPTS):
            ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False,
                     runtime_env=runtime_env)
    except Exception as e:  # Ray raises ConnectionError, ValueError, RuntimeError, ...
        hint = ""
        if os.environ.get("RAY_AUTH_MODE") != "token":
            hint = ("; a cluster with token authentication (Ray's default) also needs "
                    "RAY_AUTH_MODE=token and its token on this machine (RAY_AUTH_TOKEN or "
                    "~/.ray/auth_token)")
        raise BadInput(f"--address {address}: cannot connect to Ray: "
                       f"{str(e).strip()[:2000]}{hint}") from e
    cpus = int(ray.cluster_resources().get("CPU", 0))
    return ray, False, f"the Ray cluster at {address} ({len(ray.nodes())} nodes, {cpus} CPUs)"
