"""`scripts/common.py`: network names, result files and the run-config arguments the
scripts share."""

from __future__ import annotations

import argparse
import json
import math

import common
import numpy as np
import pytest


def test_network_names_round_trip():
    assert common.parse_network("512x3") == (512, 3)
    assert common.parse_network(" 64X0 ") == (64, 0)
    assert common.network_name(*common.parse_network("1024x6")) == "1024x6"
    assert common.parse_networks("512x3,,1024x6") == [(512, 3), (1024, 6)]
    for bad in ("512by3", "512x", "0x3", "x3"):
        with pytest.raises(argparse.ArgumentTypeError):
            common.parse_network(bad)
    with pytest.raises(argparse.ArgumentTypeError):
        common.parse_network("512x0", min_layers=1)
    with pytest.raises(argparse.ArgumentTypeError):
        common.parse_networks(" , ")


def test_networks_flag_exits_naming_the_flag(capsys):
    parser = argparse.ArgumentParser()
    with pytest.raises(SystemExit):
        common.networks_flag(parser, "512by3")
    assert "--networks" in capsys.readouterr().err


def test_forward_flops_and_widths():
    widths = common.dense_widths(503, 22, 512, 3)
    assert widths == [503, 512, 512, 512, 22]
    assert common.forward_flops(widths) == 2 * (503 * 512 + 2 * 512 * 512 + 512 * 22)


def test_write_json_is_json_safe_and_leaves_no_temporary(tmp_path, capsys):
    path = tmp_path / "sub" / "out.json"
    common.write_json({"a": np.float32(1.5), "b": math.nan, "c": (1, np.int64(2)), 3: math.inf}, path)
    assert json.loads(path.read_text()) == {"a": 1.5, "b": None, "c": [1, 2], "3": None}
    common.write_result(path, {"x": 1})
    assert json.loads(path.read_text()) == {"x": 1}
    assert capsys.readouterr().out == f"wrote {path}\n"
    assert [p.name for p in path.parent.iterdir()] == ["out.json"]


def test_machine_facts_in_the_order_asked():
    facts = common.machine_facts("jax_version", "platform", "cpu_count")
    assert list(facts) == ["jax_version", "platform", "cpu_count"]
    assert facts["platform"] in ("cpu", "gpu", "tpu", "cuda", "rocm") and facts["cpu_count"] >= 1
    load = common.loadavg()
    assert load is None or (len(load) == 3 and all(v >= 0 for v in load))


def test_config_arguments_load_and_reject(capsys):
    parser = argparse.ArgumentParser()
    common.add_config_arguments(parser)
    args = parser.parse_args(["--set", "network.hidden_size=64"])
    config = common.load_lost_cities_config(args, "needs lost_cities")
    assert config.network.hidden_size == 64 and args.config == str(common.DEFAULT_CONFIG)
    args = parser.parse_args(["--config", str(common.DEFAULT_CONFIG.parent / "kuhn.yaml")])
    assert common.load_lost_cities_config(args, "this needs lost_cities") is None
    assert capsys.readouterr().err.startswith("error: game='kuhn': this needs lost_cities")
    args = parser.parse_args(["--set", "network.hidden=3"])
    assert common.load_lost_cities_config(args, "x") is None
    assert "network.hidden" in capsys.readouterr().err
