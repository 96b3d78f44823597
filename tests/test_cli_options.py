"""Shared CLI options that later commands build on."""

import click
from click.testing import CliRunner

from synth_cli._common import seed_option


@click.command()
@seed_option
def _noisy(seed):
    click.echo(f"seed={seed}")


def test_seed_option_warns_on_stderr_that_seeded_runs_are_for_testing():
    result = CliRunner().invoke(_noisy, ["--seed", "7"])
    assert result.exit_code == 0
    assert result.stdout == "seed=7\n"
    assert "NOT for release" in result.stderr and "--seed 7" in result.stderr


def test_no_seed_means_no_warning_and_none():
    result = CliRunner().invoke(_noisy, [])
    assert result.stdout == "seed=None\n" and result.stderr == ""


def test_negative_seed_is_refused():
    result = CliRunner().invoke(_noisy, ["--seed", "-1"])
    assert result.exit_code != 0 and "Traceback" not in result.output
