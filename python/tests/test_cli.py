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


def test_a_closed_stdout_ends_sojourn_quietly():
    """`sojourn ... | head -1`: no traceback when the reader leaves (rich's console exits 1
    quietly on its own; plain prints end with 141, as a SIGPIPE'd filter's shell status)."""
    import subprocess
    import sys

    for argv in (["theory", "response", "--help"], ["reproduce", "000", "--list"]):
        child = subprocess.Popen([sys.executable, "-m", "sojourn.cli", *argv], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
        child.stdout.readline()
        child.stdout.close()
        stderr = child.stderr.read().decode()
        assert child.wait(timeout=30) in (0, 1, 141) and "Traceback" not in stderr, stderr
