"""What the scripts in this folder share: machine facts and result files, network names,
timing, and the run-config arguments.

It lives beside the scripts, not in the `lcjax` package, because it is measurement
scaffolding rather than part of the library: a script imports it as `import common`, which
works without any path edits because Python puts a script's own folder first on `sys.path`
(`python scripts/NAME.py`). The tests put this folder on `sys.path` themselves
(tests/conftest.py). The argparse number types that the `lcjax` command also uses are in
`lcjax.argtypes`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

# The run config the Lost Cities benchmarks and the sweep start from.
DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "deep_cfr" / "default.yaml"


# ----------------------------------------------------------------------------- machine
def loadavg() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (2 decimals), or None where the OS has none."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def machine_facts(*names: str) -> dict[str, Any]:
    """The named facts about this machine and JAX, in the order asked, for a result's footer.

    Names: `platform` (the first device's platform), `backend` (`jax.default_backend()`),
    `device` and `device_kind` (the first device's kind), `cpu_count`, `machine` (the CPU
    architecture) and `jax_version`. Each script keeps the keys its JSON always had.
    """
    import jax  # here, not at the top: the sweep's `--help` and its checks stay JAX-free

    device = jax.devices()[0]
    facts = {
        "platform": device.platform,
        "backend": jax.default_backend(),
        "device": str(device.device_kind),
        "device_kind": device.device_kind,
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "jax_version": jax.__version__,
    }
    return {name: facts[name] for name in names}


# ----------------------------------------------------------------------------- results
def json_safe(value):
    """A JSON-safe copy: numpy scalars to Python numbers, non-finite floats to null."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_json(data: dict, path: str | Path, indent: int = 1) -> None:
    """Write `data` (made `json_safe`) to `path` atomically: a temporary file in the same
    folder, then `os.replace`, so a crash never leaves half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(json_safe(data), f, indent=indent)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_result(path: str | Path, data: dict) -> None:
    """A benchmark's `--json FILE`: `data` indented by two, then "wrote FILE" on stdout."""
    write_json(data, path, indent=2)
    print(f"wrote {path}")


# ----------------------------------------------------------------------------- networks
def network_name(hidden: int, layers: int) -> str:
    """"HxL", the name of a network (hidden width x hidden layers) in flags, tables and JSON."""
    return f"{hidden}x{layers}"


def parse_network(text: str, min_layers: int = 0) -> tuple[int, int]:
    """"512x3" -> (hidden_size 512, num_layers 3); argparse.ArgumentTypeError otherwise."""
    try:
        hidden, layers = (int(v) for v in text.strip().lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"network {text!r} is not HIDDENxLAYERS, e.g. 512x3") from None
    if hidden <= 0 or layers < min_layers:
        raise argparse.ArgumentTypeError(f"network {text!r}: need hidden > 0 and layers >= {min_layers}")
    return hidden, layers


def parse_networks(text: str, min_layers: int = 0) -> list[tuple[int, int]]:
    """"512x3,1024x6" -> [(512, 3), (1024, 6)] (empty items skipped); at least one."""
    networks = [parse_network(part, min_layers) for part in text.split(",") if part.strip()]
    if not networks:
        raise argparse.ArgumentTypeError(f"no network given in {text!r}; expected HIDDENxLAYERS, e.g. 512x3")
    return networks


def networks_flag(parser: argparse.ArgumentParser, text: str, flag: str = "--networks") -> list[tuple[int, int]]:
    """`parse_networks(text)`, or exit through `parser.error` naming `flag`."""
    try:
        return parse_networks(text)
    except argparse.ArgumentTypeError as err:
        parser.error(f"{flag}: {err}")


def dense_widths(in_size: int, out_size: int, hidden: int, layers: int) -> list[int]:
    """Feature widths through `lcjax.cfr.networks.MLP`: input, `layers` hidden, output."""
    return [in_size] + [hidden] * layers + [out_size]


def forward_flops(widths: list[int]) -> int:
    """FLOPs of one state's forward pass through dense layers `widths[0] -> ... -> [-1]`:
    2 x the multiply-adds (biases, activations and skip additions are negligible)."""
    return sum(2 * a * b for a, b in zip(widths[:-1], widths[1:]))


# ----------------------------------------------------------------------------- timing
def time_interleaved(calls: dict[str, Callable[[], object]], repeats: int, min_time: float, warmup: int = 2) -> dict:
    """Seconds per call of each `calls[name]()` (each call waited for): best and median.

    Each call is warmed up (`warmup` calls; the first one compiles if needed), then
    `repeats` rounds time every call in turn, each over `number` back-to-back calls
    (`number` chosen per call so that it lasts about `min_time`). Interleaving lets the
    variants (e.g. the precisions) share the machine's load drift.

    Returns:
      {name: {"best": s, "median": s, "number": n}}.
    """
    import jax

    numbers, per_call = {}, {name: [] for name in calls}
    for name, call in calls.items():
        for _ in range(max(1, warmup)):
            jax.block_until_ready(call())
        t0 = time.perf_counter()
        jax.block_until_ready(call())
        numbers[name] = max(1, math.ceil(min_time / max(time.perf_counter() - t0, 1e-7)))
    for _ in range(max(1, repeats)):
        for name, call in calls.items():
            t0 = time.perf_counter()
            for _ in range(numbers[name]):
                jax.block_until_ready(call())
            per_call[name].append((time.perf_counter() - t0) / numbers[name])
    return {name: {"best": min(v), "median": statistics.median(v), "number": numbers[name]}
            for name, v in per_call.items()}


# ----------------------------------------------------------------------------- run config
def add_config_arguments(parser: argparse.ArgumentParser, what: str = "run config") -> None:
    """`--config FILE` (default: configs/deep_cfr/default.yaml) and repeatable `--set
    SECTION.KEY=VALUE` (into `args.overrides`), as `lcjax train` takes them."""
    parser.add_argument("--config", default=str(DEFAULT_CONFIG),
                        help=f"{what} (default: configs/deep_cfr/default.yaml)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override a config key, as in `lcjax train` (repeatable)")


def load_lost_cities_config(args: argparse.Namespace, needs: str):
    """The `lcjax.config.Config` of `args.config` with `args.overrides`, or None after one
    "error:" line on stderr (a bad file or value, or a game other than Lost Cities: `needs`
    ends that line, e.g. "this benchmark needs lost_cities")."""
    from lcjax import config as lc_config

    try:
        config = lc_config.load_config(args.config, args.overrides)
    except (lc_config.ConfigError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return None
    if config.game != "lost_cities":
        print(f"error: game={config.game!r}: {needs}", file=sys.stderr)
        return None
    return config


def config_path_for_json(path: str) -> str:
    """The config file as a result file records it: relative to the working folder."""
    return os.path.relpath(path) if os.path.exists(path) else path
