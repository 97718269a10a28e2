"""The command lines' number types refuse what is out of range, by name, and pass the rest."""

from __future__ import annotations

import argparse

import pytest

from sojourn.argtypes import number, positive, positive_int


@pytest.mark.parametrize("parse, text, value", [
    (positive, "0.5", 0.5), (positive, "1e10", 1e10), (positive_int, "3", 3),
    (number(at_least=0, what="minutes"), "0", 0.0), (number(above=0, below=1), "0.999", 0.999)])
def test_values_in_range_pass_as_their_kind(parse, text, value):
    assert parse(text) == value and type(parse(text)) is type(value)


@pytest.mark.parametrize("parse, text, message", [
    (positive, "0", "'0': expected a number > 0"),
    (positive, "-2", "'-2': expected a number > 0"),
    (positive, "nan", "'nan': expected a number > 0"),
    (positive, "fast", "'fast': expected a number > 0"),
    (positive_int, "1.5", "'1.5': expected a whole number >= 1"),
    (positive_int, "0", "'0': expected a whole number >= 1"),
    (number(at_least=0, what="minutes"), "-1", "'-1': expected minutes >= 0"),
    (number(above=0, below=1, what="a load"), "1", "'1': expected a load > 0 and < 1")])
def test_values_out_of_range_are_refused_by_name(parse, text, message):
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        parse(text)
    assert str(refused.value) == message


def test_argparse_reports_the_bad_option_and_exits_2(capsys):
    parser = argparse.ArgumentParser(prog="x")
    parser.add_argument("--clients", type=positive_int)
    with pytest.raises(SystemExit) as refused:
        parser.parse_args(["--clients", "0"])
    assert refused.value.code == 2
    assert "argument --clients: '0': expected a whole number >= 1" in capsys.readouterr().err
