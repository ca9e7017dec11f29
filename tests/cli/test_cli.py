"""The console command's help lists every subcommand and each one's help renders."""

from __future__ import annotations

import pytest

from whileai_datasets import cli

COMMANDS = ("demo", "export", "push", "template", "show-mask", "audit")


def test_main_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match="0"):
        cli.main(["--help"])
    out = capsys.readouterr().out
    for command in COMMANDS:
        assert f"    {command}" in out


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match="0"):
        cli.main([command, "--help"])
    assert f"usage: whileai-datasets {command}" in capsys.readouterr().out
