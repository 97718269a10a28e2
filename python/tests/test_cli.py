"""The `sojourn` command's dispatch table."""

import importlib.util

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
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} not built yet")
    mod = importlib.import_module(module)
    assert callable(mod.register)
