"""Entry point: the ``synth`` click group and its commands."""

from __future__ import annotations

import click

from synth import __version__

from ._common import SynthGroup
from .answer_cmd import answer
from .demo_cmd import demo
from .evaluate_cmd import evaluate
from .generate_cmd import generate
from .model_cmd import model
from .sample_cmd import sample
from .schema_cmd import schema
from .workload_cmd import workload

@click.group(cls=SynthGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="synth")
def main() -> None:
    """synth: differentially private synthetic data and workload answers.

    \b
    Example session:
      synth demo -o synth-demo
      synth schema show synth-demo/demo-schema.json
      synth workload marginals --schema S.json --way 2 -o W.json
      synth answer DATA.csv --schema S.json --workload W.json --exact -o answers.csv
      synth generate DATA.csv --schema S.json --workload W.json --epsilon 1 -o synthetic.csv
    """


main.add_command(schema)
main.add_command(workload)
main.add_command(answer)
main.add_command(generate)
main.add_command(sample)
main.add_command(model)
main.add_command(evaluate)
main.add_command(demo)
