"""`lcjax.argtypes`: the argparse number types of the `lcjax` command and the scripts."""

from __future__ import annotations

import argparse

import pytest

from lcjax.argtypes import nonnegative_int, positive_float, positive_int, positive_int_list


def test_accepts_in_range():
    assert positive_int("3") == 3
    assert nonnegative_int("0") == 0
    assert positive_float("0.5") == 0.5 and positive_float("2") == 2.0
    assert positive_int_list("512, 1024") == [512, 1024]


@pytest.mark.parametrize(
    "parse, text",
    [
        (positive_int, "0"), (positive_int, "-2"), (positive_int, "1.5"), (positive_int, "many"),
        (nonnegative_int, "-1"), (nonnegative_int, "x"),
        (positive_float, "0"), (positive_float, "-1e-3"), (positive_float, "inf"), (positive_float, "nan"),
        (positive_float, "fast"),
        (positive_int_list, "512,abc"), (positive_int_list, "3,0"), (positive_int_list, ""),
    ],
)
def test_rejects_with_the_value_quoted(parse, text):
    with pytest.raises(argparse.ArgumentTypeError) as err:
        parse(text)
    assert repr(text) in str(err.value)


def test_argparse_names_the_flag(capsys):
    parser = argparse.ArgumentParser()
    parser.add_argument("--games", type=positive_int)
    with pytest.raises(SystemExit):
        parser.parse_args(["--games", "0"])
    assert "argument --games: expected a positive integer, got '0'" in capsys.readouterr().err
    assert parser.parse_args(["--games", "7"]).games == 7
