"""The `sojourn` command's dispatch table."""

import importlib

import pytest

from sojourn import cli


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for name in cli.COMMANDS:
        assert name in out


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_every_command_has_help(name, capsys):
    """Each subcommand's module registers its arguments and answers --help."""
    module, _ = cli.COMMANDS[name]
    assert callable(importlib.import_module(module).register)
    with pytest.raises(SystemExit) as exit_info:
        cli.main([name, "--help"])
    assert exit_info.value.code == 0
    assert f"sojourn {name}" in capsys.readouterr().out

