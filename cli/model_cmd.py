"""``synth model show``: what a released model file holds and what it spent."""

from __future__ import annotations

import json

import click

from ._common import flush_stdout


@click.group()
def model() -> None:
    """Inspect a released model file (from synth generate --model or answer --save-model).

    \b
    Example:
      synth model show model.npz
    """


@model.command("show")
@click.argument("model_file", metavar="MODEL", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object (for programs).")
def show(model_file: str, as_json: bool) -> None:
    """Print what MODEL holds: mechanism and options, epsilon/delta spent and how (the ledger),
    n (public or a noisy count), the columns, the representation and its size, the checksum and
    the format version. The file is checked in full first (a damaged or edited file is refused).
    A model is a release: nothing shown here is private.

    \b
    Examples:
      synth model show model.npz
      synth model show model.npz --json
    """
    from synth.models.model import model_summary

    summary = model_summary(model_file)
    if as_json:
        click.echo(json.dumps(summary, indent=1))
    else:
        for line in _lines(summary):
            click.echo(line)
    flush_stdout()


def _lines(summary: dict) -> list[str]:
    """The summary as aligned text lines."""
    privacy, storage = summary["privacy"], summary["storage"]
    budget, spent = privacy.get("budget", {}), privacy.get("spent", {})
    n = f"{summary['rows']:,.0f} ({'public' if summary['rows_public'] else 'a noisy count, bought from the budget'})"
    lines = [
        f"model:        {summary['file']} (format version {summary['format_version']}, synth "
        f"{summary['library_version'] or 'unknown'})",
        f"mechanism:    {summary['mechanism']}" + (" (SEEDED: for testing, never for release)" if summary["seeded"]
                                                   else ""),
        f"n:            {n}",
        f"budget:       epsilon={budget.get('epsilon', float('nan')):g}, delta={budget.get('delta', 0.0):g}",
        f"spent:        epsilon={spent.get('epsilon', float('nan')):.6g}, delta={spent.get('delta', 0.0):g}"
        + (f" ({spent['method']} composition)" if spent.get("method") else ""),
    ]
    charges = privacy.get("charges", [])
    if charges:
        lines.append(f"ledger:       {len(charges):,} charge{'s' * (len(charges) != 1)}")
        for charge in charges:
            cost = (f"rho={charge['rho']:.6g}" if charge.get("rho") else
                    f"epsilon={charge.get('epsilon') or 0:.6g}" + (f", delta={charge['delta']:g}"
                                                                   if charge.get("delta") else ""))
            lines.append(f"  {charge.get('note') or '-'}: {charge.get('mechanism', '?')}, {cost}")
    width = max(len(c["name"]) for c in summary["columns"])
    lines.append(f"columns:      {len(summary['columns'])} (universe {summary['universe_size']:,} cells)")
    lines += [f"  {c['name']:<{width}}  {c['kind']:<11}  {c['size']:>6}" for c in summary["columns"]]
    kept = f"{storage['representation']}, {storage['cells']:,} cells"
    if storage["representation"] == "factored":
        kept += f" in its junction tree's cliques, over {len(storage['factors']):,} measured subsets"
    lines.append(f"distribution: {kept}")
    lines.append(f"rounds:       {summary['rounds_logged']:,} logged")
    options = ", ".join(f"{k}={_short(v)}" for k, v in summary["parameters"].items())
    lines.append(f"options:      {options or '(none recorded)'}")
    lines.append(f"checksum:     {summary['checksum'] or '(none: a version 1 file)'}")
    return lines


def _short(value) -> str:
    """A parameter's value, cut when long (a list of subsets)."""
    text = json.dumps(value) if not isinstance(value, float) else f"{value:.6g}"
    return text if len(text) <= 60 else text[:57] + "..."
