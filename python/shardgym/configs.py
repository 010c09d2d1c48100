"""The experiment configs that ship with the package, found by name.

    shardgym.configs.names()            # ["live-quickstart", "pipeline-quickstart", ...]
    shardgym.configs.resolve("quickstart")   # the path of quickstart.yaml

An installed package holds them in shardgym/configs (python/CMakeLists.txt installs
experiments/*.yaml and experiments/scenarios/*.yaml there); from a source checkout
(PYTHONPATH=build/python:python) they are read from experiments/ itself. hardware.yaml is
not an experiment: the others include it.
"""
from __future__ import annotations

import os
import pathlib
from typing import List, Union

_PACKAGE = pathlib.Path(__file__).resolve().parent
# hardware: included by the others, not a config of its own; suite: a task suite
# (`shardgym suite`), whose tasks are the suite/ configs.
_NOT_EXPERIMENTS = {"hardware", "suite"}


def directory() -> pathlib.Path:
    """The folder the shipped configs are read from (installed package, else checkout)."""
    installed = _PACKAGE / "configs"
    if installed.is_dir():
        return installed
    checkout = _PACKAGE.parents[1] / "experiments"
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"no shipped configs: neither {installed} nor {checkout} exists")


def names() -> List[str]:
    """Names of the shipped experiment configs: "quickstart", "scenarios/ib-4node",
    "suite/stragglers", ..."""
    root = directory()
    found = (list(root.glob("*.yaml")) + list(root.glob("scenarios/*.yaml")) +
             list(root.glob("suite/*.yaml")))
    out = [p.relative_to(root).with_suffix("").as_posix() for p in found]
    return sorted(n for n in out if n not in _NOT_EXPERIMENTS)


def resolve(config: Union[str, os.PathLike]) -> str:
    """The path of `config`: an existing file as it is; otherwise a shipped config's name,
    with or without "scenarios/" and ".yaml" ("quickstart", "ib-4node",
    "scenarios/ib-4node.yaml"). A bare name that matches nothing is a ValueError listing the
    shipped names; a path that matches nothing is returned as it is (the C++ loader then says
    it cannot read it)."""
    path = pathlib.Path(config)
    if path.is_file():
        return os.fspath(config)
    name = path.as_posix()
    if name.endswith(".yaml"):
        name = name[: -len(".yaml")]
    if name.startswith("experiments/"):  # the checkout-relative spelling of the README
        name = name[len("experiments/"):]
    known = names()
    for candidate in (name, f"scenarios/{name}"):
        if candidate in known:
            return os.fspath(directory() / f"{candidate}.yaml")
    if "/" in path.as_posix() or path.suffix:
        return os.fspath(config)
    raise ValueError(f"config {os.fspath(config)!r}: no such file and no shipped config of "
                     f"that name (shipped: {', '.join(known)})")
