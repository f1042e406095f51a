"""The processes and devices of a run: `jax.distributed` and the data-parallel mesh.

A run's `distributed` section (`lcjax.sections.DistributedConfig`) says how many devices it
uses and, for a run of several processes (one per host, typically), where process 0's
coordinator listens:

* `initialize(cfg)`: `jax.distributed.initialize` when the run has more than one process
  (from the section, else from JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and
  JAX_PROCESS_ID), before any JAX work. JAX aborts the whole process when a coordinator is
  unreachable, so a non-zero process first checks, for up to `initialization_timeout`
  seconds, that the address accepts connections, and raises `DistributedError` naming it.
* `make_mesh(cfg)`: the one-axis ("data") mesh of the run's devices; `lcjax.cfr.mesh` splits
  the solver's phases over it. One device means the plain single-device program.
* `is_main_process`, `sync`, `broadcast_text`: what the run driver needs so that only
  process 0 writes files while every process runs the same programs.
"""

from __future__ import annotations

import os
import socket
import time
from typing import NamedTuple

import numpy as np

from lcjax.cfr.mesh import AXIS
from lcjax.settings import ConfigError

__all__ = [
    "DistributedError",
    "ProcessSettings",
    "broadcast_text",
    "initialize",
    "is_main_process",
    "make_mesh",
    "process_settings",
    "sync",
]


class DistributedError(ValueError):
    """Processes cannot be connected; the message is one line naming the address."""


class ProcessSettings(NamedTuple):
    """The resolved processes of a run: coordinator "host:port" (None for one process),
    process count, this process's index."""

    coordinator_address: str | None
    num_processes: int
    process_id: int


def _env_int(name: str, key: str) -> int | None:
    text = os.environ.get(name)
    if text is None or text.strip() == "":
        return None
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"expected an integer in the environment variable {name}, got {text!r}", key) from None


def process_settings(cfg) -> ProcessSettings:
    """The `distributed` section `cfg` completed from the environment, checked.

    Raises:
      ConfigError: a process count or id that does not fit, or several processes without a
        coordinator address.
    """
    address = cfg.coordinator_address or os.environ.get("JAX_COORDINATOR_ADDRESS") or None
    num = cfg.num_processes if cfg.num_processes is not None else _env_int("JAX_NUM_PROCESSES", "distributed.num_processes")
    pid = cfg.process_id if cfg.process_id is not None else _env_int("JAX_PROCESS_ID", "distributed.process_id")
    num = 1 if num is None else num
    if num < 1:
        raise ConfigError(f"expected a positive integer, got {num}", "distributed.num_processes")
    if num == 1:
        if pid not in (None, 0):
            raise ConfigError(f"expected 0 for a single process (num_processes is 1), got {pid}", "distributed.process_id")
        return ProcessSettings(None, 1, 0)
    if address is None:
        raise ConfigError(f"needed when num_processes is {num} (host:port of process 0)", "distributed.coordinator_address")
    if pid is None:
        raise ConfigError(f"needed when num_processes is {num} (0..{num - 1})", "distributed.process_id")
    if not 0 <= pid < num:
        raise ConfigError(f"expected an integer in 0..{num - 1} (num_processes is {num}), got {pid}", "distributed.process_id")
    return ProcessSettings(address, num, pid)


def _reachable(address: str, timeout: float) -> bool:
    """Whether `address` ("host:port") accepts a TCP connection within `timeout` seconds."""
    host, _, port = address.rpartition(":")
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=max(0.1, min(2.0, timeout))):
                return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.2)


def initialize(cfg) -> ProcessSettings:
    """Connect this process to the others of the run (nothing for a single process).

    Call it before any JAX computation. Calling it again (e.g. a second run in the same
    processes) is a no-op.

    Raises:
      ConfigError: see `process_settings`.
      DistributedError: the coordinator is unreachable, or JAX already computed something.
    """
    import jax

    settings = process_settings(cfg)
    if settings.num_processes == 1 or jax.distributed.is_initialized():
        return settings
    address, timeout = settings.coordinator_address, cfg.initialization_timeout
    if settings.process_id != 0 and not _reachable(address, timeout):
        raise DistributedError(
            f"cannot reach the coordinator at {address} within {timeout} s "
            f"(is process 0 of {settings.num_processes} running there?)"
        )
    try:  # CPU devices of several processes talk through gloo (GPUs use their own collectives)
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    except (AttributeError, KeyError, ValueError):
        pass  # a JAX without the option
    try:
        jax.distributed.initialize(
            address, settings.num_processes, settings.process_id, initialization_timeout=timeout
        )
    except RuntimeError as err:
        line = (str(err).strip().splitlines() or [""])[0]
        raise DistributedError(f"cannot join the run at {address} as process {settings.process_id}: {line}") from None
    return settings


def make_mesh(cfg):
    """The run's one-axis mesh (axis "data") over `cfg.devices` devices.

    A single process takes its first devices; several processes each take the same number
    of their own (devices / process count), in process order.

    Raises:
      ConfigError: more devices than exist, or a count the processes cannot share evenly.
    """
    import jax
    from jax.sharding import Mesh

    devices = jax.devices()
    processes = jax.process_count()
    wanted = len(devices) if cfg.devices == "all" else cfg.devices
    if wanted > len(devices):
        kind = devices[0].platform
        raise ConfigError(f"expected at most the {len(devices)} {kind} devices this run sees, got {wanted}", "distributed.devices")
    if wanted % processes:
        raise ConfigError(f"expected a multiple of the {processes} processes, got {wanted}", "distributed.devices")
    per_process = wanted // processes
    chosen = []
    for p in range(processes):
        mine = [d for d in devices if d.process_index == p]
        if len(mine) < per_process:
            raise ConfigError(f"process {p} has {len(mine)} devices, fewer than {per_process}", "distributed.devices")
        chosen += mine[:per_process]
    return Mesh(np.array(chosen), (AXIS,))


def is_main_process() -> bool:
    """True in process 0 (the only one that writes run files)."""
    import jax

    return jax.process_index() == 0


def sync(name: str) -> None:
    """Wait until every process of the run reaches the point `name` (no-op for one)."""
    import jax

    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def broadcast_text(text: str, size: int = 4096) -> str:
    """Process 0's `text` in every process (as is for one process); at most `size` bytes."""
    import jax

    if jax.process_count() == 1:
        return text
    from jax.experimental import multihost_utils

    data = text.encode()
    if len(data) > size:
        raise ValueError(f"text of {len(data)} bytes is longer than {size}")
    buffer = np.zeros(size, np.uint8)  # zero padding ends the text
    buffer[: len(data)] = np.frombuffer(data, np.uint8)
    out = np.asarray(multihost_utils.broadcast_one_to_all(buffer))
    return bytes(out).rstrip(b"\0").decode()
