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
def test_every_command_module_registers(name):
    module, _ = cli.COMMANDS[name]
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError:
        pytest.skip(f"{module} not built yet")
    assert callable(mod.register)
