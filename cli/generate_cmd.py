"""``synth generate``: fit a private model of DATA for a workload and write a synthetic table."""

from __future__ import annotations

import sys

import click

from ._common import (
    SectionedCommand,
    bounds_option,
    BETA,
    DELTA,
    EPSILON,
    CheckedFloat,
    bad_rows_option,
    scan_data,
    scheduler_option,
    columns_option,
    load_schema,
    max_model_cells_option,
    note,
    output_folder_exists,
    flush_stdout,
    load_workload,
    progress,
    quiet_option,
    representation_option,
    seed_option,
    storage_options,
    test_option,
    variant_option,
    warn,
    warn_if_inferred,
    warn_if_large_delta,
)
from ._outputs import check_outputs, force_option

MECHANISMS = ("mwem", "blr", "pmw")


#: generate's options by what they are for, and by engine (its --help lists them so).
HELP_SECTIONS = {
    "Input": ("schema_file", "constraints_file", "workload_file", "columns", "bad_rows", "scheduler"),
    "Schema derived under DP (no --schema)": ("schema_share", "bounds", "missing_tokens"),
    "Privacy": ("epsilon", "delta", "rows", "count_epsilon", "seed"),
    "Engine": ("mechanism", "representation", "max_model_cells", "beta"),
    "MWEM (--mechanism mwem, the default)": ("noise", "selection", "rounds", "measure", "select_share", "passes",
                                             "average"),
    "PMW (--mechanism pmw)": ("variant", "test_kind", "updates", "alpha"),
    "BLR (--mechanism blr)": ("net", "prior", "prior_share", "prior_model", "net_size", "candidates", "max_net"),
    "Output": ("output", "model_file", "sample_rows", "rounding", "free_text", "force", "quiet"),
}


@click.command(cls=SectionedCommand, sections=HELP_SECTIONS)
@click.argument("data", type=click.Path(exists=True, dir_okay=True))
@click.option("--schema", "schema_file", type=click.Path(exists=True, dir_okay=False),
              help="Schema JSON (public knowledge of the columns), or a private-pgm domain file {column: size}. "
                   "Without it a schema is derived under DP with --schema-share of the budget (needs --delta).")
@click.option("--constraints", "constraints_file", type=click.Path(exists=True, dir_okay=False),
              help="Public constraints, JSON: a list of {\"function\": {\"of\": A, \"column\": B, \"map\": "
                   "{...}}} (B is determined by A) and {\"forbid\": {column: value, ...}} entries, as a schema's "
                   "\"constraints\". The model gives the rows they rule out zero mass and no synthetic row breaks "
                   "one, at no privacy cost. With a derived schema, the parts naming a value it reads as 'other' "
                   "or clips are left out, with a warning.")
@click.option("--schema-share", type=CheckedFloat("check_probability", "schema-share"), default=None,
              help="Without --schema: the share of the budget spent deriving the schema (default 0.3): of its "
                   "zCDP rho when the run composes in zCDP (MWEM with Gaussian noise: the two then compose in rho), "
                   "else of --epsilon and --delta; the run gets the rest.")
@bounds_option("Without --schema: public bounds of a numeric column (repeatable), e.g. age=0:120.")
@click.option("--missing-token", "missing_tokens", multiple=True, metavar="TOKEN",
              help="Without --schema: a cell text that means a missing value, such as '?' (repeatable).")
@click.option("--workload", "workload_file", type=click.Path(exists=True, dir_okay=False),
              help="Workload JSON: the queries the synthetic table should answer well (default: every 3-way "
                   "marginal of the columns, as in the Python API; the run says so).")
@click.option("--mechanism", type=click.Choice(MECHANISMS), default="mwem", show_default=True,
              help="mwem (offline workload), blr (net mechanism, small universes) or pmw (Private "
                   "Multiplicative Weights).")
@click.option("--epsilon", type=EPSILON, required=True, help="Privacy budget epsilon for the whole run.")
@click.option("--delta", type=DELTA, default=0.0, show_default=True,
              help="Privacy budget delta. pmw with delta > 0 accounts in rho-zCDP with exact discrete Gaussian "
                   "measurements (reported as epsilon, delta), and so does mwem unless its plan adds less noise "
                   "under pure epsilon-DP (--noise); delta = 0 keeps pure epsilon-DP with discrete Laplace. blr is "
                   "pure epsilon-DP.")
@click.option("--noise", type=click.Choice(["auto", "laplace", "gaussian"]), default="auto", show_default=True,
              help="mwem: laplace (pure epsilon-DP, which is also (epsilon, delta)-DP) or gaussian (rho-zCDP, "
                   "needs --delta). auto: with --delta, whichever adds less expected noise to a measured cell for "
                   "the planned measurements (Laplace when they are few); the run says which and why.")
@click.option("--rows", type=click.IntRange(1, 2**63 - 1),
              help="Row count n, if it is PUBLIC knowledge (else a noisy count is bought from the budget).")
@click.option("--count-epsilon", type=CheckedFloat("check_epsilon", "count-epsilon"),
              help="Epsilon for the noisy row count when n is not public (default 5% of --epsilon).")
@click.option("--selection", type=click.Choice(["auto", "adaptive", "classic"]), default="auto", show_default=True,
              help="mwem: adaptive (AIM's rounds: the workload's marginals and those below them, one-way first, "
                   "budget growing when a measurement taught little, rounds until the budget is spent) or classic "
                   "(T rounds over the workload's marginals, or every one of them). auto: adaptive where the noise "
                   "of measuring every marginal would dwarf n (small tables), classic otherwise; the run says which.")
@click.option("--rounds", type=click.IntRange(1),
              help="mwem --selection classic: rounds T (default: every marginal when there are at most 50; else two "
                   "per column, at most 50, or with --delta five per column, at most 64; measuring queries, 50). At most "
                   "one per marginal (or query) of the workload: more are cut, and the run says so.")
@click.option("--measure", type=click.Choice(["marginal", "query"]), default="marginal", show_default=True,
              help="mwem: measure a whole marginal per round, or one query.")
@click.option("--select-share", type=CheckedFloat("check_probability", "select-share"), default=None,
              help="mwem: share of each round's epsilon spent on selection (the rest measures). Default 0.1, "
                   "or none when the rounds measure every candidate anyway.")
@click.option("--passes", type=click.IntRange(1),
              help="mwem: multiplicative-weights passes per round when selecting (default 10; a final fit follows); pmw: times the "
                   "workload is fed (default 1).")
@click.option("--average", is_flag=True, help="mwem: release the average of the rounds' estimates, not the last.")
@click.option("--net", type=click.Choice(["exact", "sampled"]),
              help="blr: enumerate every m-row database (tiny universes; the default without a prior) or score K "
                   "candidates drawn from a prior (the default with --prior or --prior-model).")
@click.option("--prior", type=click.Choice(["mwem", "pmw", "uniform"]),
              help="blr --net sampled: draw the candidates from the release of MWEM or PMW, run first on "
                   "--prior-share of epsilon (default mwem); uniform: uniform random rows (rarely better than "
                   "uniform rows; the run warns when it cannot be).")
@click.option("--prior-share", type=CheckedFloat("check_probability", "prior-share"),
              help="blr --prior mwem|pmw: share of epsilon (after any row count) for the prior engine; the "
                   "selection gets the rest (default 0.8).")
@click.option("--prior-model", type=click.Path(exists=True, dir_okay=False),
              help="blr: draw the candidates from this released model (.npz over the same columns) instead; all "
                   "of epsilon goes to the selection. Its own privacy loss is yours to add.")
@click.option("--net-size", type=click.IntRange(1),
              help="blr: rows m of each candidate database (default: exact net, the m minimizing its error "
                   "bound; a prior's net, n up to 131,072; uniform net, enough rows to answer every query "
                   "within 0.1 of n).")
@click.option("--candidates", type=click.IntRange(1),
              help="blr --net sampled: candidates K (default: a prior's net, 100 to 1,000 as the work allows; "
                   "uniform net, 10,000).")
@click.option("--max-net", type=click.IntRange(1), help="blr --net exact: most candidates enumerated (default 10^7).")
@click.option("--alpha", type=CheckedFloat("check_epsilon", "alpha"),
              help="Target accuracy alpha (fraction of n): blr (exact or uniform net) sets m = ceil(ln|C| / "
                   "alpha^2); pmw plans for it.")
@click.option("--updates", type=click.IntRange(1), help="pmw: fix the update bound L instead of planning it.")
@variant_option
@test_option
@representation_option
@max_model_cells_option
@click.option("--beta", type=BETA, default=0.05, show_default=True, help="Failure probability of the stated bounds.")
@click.option("--sample-rows", type=click.IntRange(0, 2**63 - 1),
              help="Rows in the synthetic table (default: n, the public or noisy row count; a table of more "
                   "than 1 GB from the default is refused: pass --sample-rows to confirm).")
@click.option("--rounding", type=click.Choice(["round", "multinomial"]), default="round", show_default=True,
              help="Turn the model into rows by controlled rounding (lower error) or multinomial sampling.")
@click.option("--free-text", type=click.Choice(["drop", "placeholder"]), default="drop", show_default=True,
              help="The schema's free-text columns (roles: \"text\"): leave them out of the table, or fill "
                   "every cell with the text '[free text]'. Identifier columns always get fresh ids.")
@click.option("--model", "model_file", type=click.Path(dir_okay=False, writable=True), callback=output_folder_exists,
              help="Also save the released model (for synth answer --model and synth sample).")
@bad_rows_option
@scheduler_option
@seed_option
@columns_option
@quiet_option
@force_option
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, writable=True, allow_dash=True),
              callback=output_folder_exists,
              help="Synthetic table to write (.csv, or .parquet with pyarrow; '-' writes CSV to stdout).")
def generate(data, schema_file, constraints_file, schema_share, bounds, missing_tokens, workload_file, mechanism, epsilon, delta, noise, rows, count_epsilon, selection, rounds,
             measure,
             select_share, passes, average, net, prior, prior_share, prior_model, net_size, candidates, max_net, alpha,
             updates, variant, test_kind, representation, max_model_cells, beta, sample_rows,
             rounding, free_text, model_file, bad_rows, scheduler, seed, columns, quiet, force, output) -> None:
    """Fit a differentially private model of DATA and write a synthetic table.

    DATA is a CSV file, a Parquet file (.parquet) or a folder of Parquet files. It is read
    once, in chunks (memory does not grow with its rows), counting only the tables the run needs.

    The model answers the --workload's queries well (without one: every 3-way marginal, as the
    Python API's default); the synthetic table has the schema's
    columns and values (numeric columns get a value drawn inside the released bin). The whole
    run is epsilon-DP (pmw: (epsilon, delta)-DP). n is public only with --rows or rows in the
    schema; otherwise a noisy count is bought from the budget and reported.

    Outputs never replace an input of the command, and replace an existing file only with
    --force; the table and the model appear together, only when the run succeeds.

    \b
    Examples:
      synth generate synth-demo/demo.csv --schema synth-demo/demo-schema.json \\
          --workload synth-demo/workload.json --epsilon 1 -o synthetic.csv --model mwem.npz
      synth generate adult.csv --schema adult-domain.json --workload w3.json \\
          --epsilon 1 --rows 48842 --bad-rows drop -o synthetic.csv
      synth generate tiny.csv --schema tiny.json --workload w.json --mechanism blr \\
          --net exact --net-size 4 --epsilon 1 -o synthetic.csv
      synth generate adult.csv --schema adult-domain.json --workload w3.json --mechanism blr \\
          --prior mwem --epsilon 1 --rows 48842 -o synthetic.csv
      synth generate titanic.csv --schema titanic-schema.json --epsilon 1 \\
          --free-text placeholder -o synthetic.csv    # fresh ids, free text as '[free text]'
      synth workload marginals --schema adult-domain.json --way 2 -o w2-all.json
      synth generate adult.csv --schema adult-domain.json --workload w2-all.json \\
          --epsilon 1 -o synthetic.csv --model adult.npz    # all 14 columns: a factored model
      synth generate adult-raw.csv --epsilon 1 --delta 1e-9 --missing-token '?' \\
          --constraints education-num.json -o synthetic.csv  # no schema: derived under DP
    """
    net = _check_blr_options(mechanism, net, prior, prior_share, prior_model, alpha)
    _check_selection(mechanism, selection, rounds, select_share, average, measure)
    _check_options(mechanism, delta, rounds, select_share, average, net, net_size, candidates, max_net, updates,
                   measure, passes, alpha, variant, test_kind, representation, max_model_cells, noise)
    storage_options(representation, max_model_cells)
    check_outputs({"DATA": data, **({"--schema": schema_file} if schema_file else {}),
                   **({"--constraints": constraints_file} if constraints_file else {}),
                   **({"--workload": workload_file} if workload_file else {}),
                   **({"--prior-model": prior_model} if prior_model else {})},
                  {"-o": output, "--model": model_file}, force)
    from synth.models.synthetic import check_output_format

    check_output_format(output)  # before any work
    derivation = None
    if schema_file is None:
        route, _ = _config(mechanism, rows, _count_share(count_epsilon, epsilon), None)
        derivation = _derived_schema(data, epsilon, delta, schema_share, bounds, missing_tokens, columns, seed, route,
                                     workload_file is not None)
        full = selected = derivation.schema
    else:
        given = [n for n, v in (("--schema-share", schema_share), ("--bounds", bounds or None),
                                ("--missing-token", missing_tokens or None)) if v is not None]
        if given:
            raise click.UsageError(f"{', '.join(given)} apply without --schema (a schema derived under DP)")
        full, selected = load_schema(schema_file, columns)
    if constraints_file:
        full = _with_constraints(constraints_file, full, derived=derivation is not None)
        selected = full if derivation is not None else full.select(columns)
    queries = load_workload(workload_file, selected)
    public_rows = rows if rows is not None else selected.rows
    share = _count_share(count_epsilon, epsilon)
    engine, budget = _engine(mechanism, selected, queries, epsilon, delta, public_rows, share, prior_model, derivation)
    from synth.privacy.accounting import Budget

    total, epsilon, delta = Budget(epsilon, delta), budget.epsilon, budget.delta  # the run's part, after a derivation
    if sample_rows is None and public_rows is not None:
        check_table_size(selected, public_rows, "n (--rows or the schema's rows)")
    warn_if_inferred(selected, schema_file)
    warn_if_large_delta(delta, public_rows)
    estimate = engine.estimate(budget)
    if estimate is not None and estimate.seconds >= ESTIMATE_AFTER_SECONDS:
        note(f"{mechanism}: {estimate.describe()}")
    # one pass: the tables the engine may ask for, and n
    counts = scan_data(data, full, queries.subsets, columns=columns, bad_rows=bad_rows, scheduler=scheduler,
                       quiet=quiet, private=public_rows is None)
    with progress(mechanism, quiet) as update:
        release = engine.run(counts, budget, seed, update)
    for message in release.warnings:
        warn(message)
    model, accountant, lines = release.model, release.accountant, release.summary
    from synth.engines.release import with_schema_cost
    from synth.models.constrained import constrain_model

    model = constrain_model(model)  # the schema's public constraints: zero mass where they rule a row out
    # a schema derived under DP counts too: within the run's total when derived here
    model = with_schema_cost(model, selected, accountant, mechanism, total if derivation is not None else None)
    import numpy as np

    from synth._io import output_group
    from synth.privacy.row_count import ledger_count_noise_sd
    from synth.models.synthetic import write_synthetic

    check_noisy_count(model.rows, ledger_count_noise_sd(accountant.ledger()), sample_rows)
    count = round(model.rows) if sample_rows is None else sample_rows
    if sample_rows is None:
        check_table_size(selected, count, "n, public" if model.rows_public else "n, a noisy count")
    with output_group() as outputs:
        target = sys.stdout if output == "-" else outputs.stage(output)
        with progress(f"writing {output}", quiet, "rows") as update:
            written = write_synthetic(target, model.distribution, selected, count, method=rounding, free_text=free_text,
                                      rng=None if seed is None else np.random.default_rng([seed, 1]), progress=update)
        if output == "-":
            flush_stdout(target)
        if model_file:
            model.save(outputs.stage(model_file))
    for line in lines:
        note(line)
    spent = accountant.spent()
    n_text = f"n={model.rows:,.0f} ({'public' if model.rows_public else 'noisy count, bought from the budget'})"
    note(f"{mechanism}: privacy spent epsilon={spent.epsilon:.6g}, delta={spent.delta:g} of epsilon={epsilon:g}; "
         f"{n_text}")
    if selected.derivation:
        derived, total = selected.derivation, model.privacy
        note(f"total with the schema's derivation (epsilon={derived['epsilon']:.6g}, delta={derived['delta']:g} "
             f"alone): epsilon={total['spent']['epsilon']:.6g}, delta={total['spent']['delta']:g} "
             f"({total['spent']['method']}); the model file records both")
    where = "stdout" if output == "-" else output
    note(f"wrote {written:,} synthetic rows to {where}" + (f"; model saved to {model_file}" if model_file else ""))


def _with_constraints(path, schema, derived):
    """``schema`` with the constraints of the JSON file ``path`` (a list, or an object with a
    "constraints" list); a derived schema keeps the parts it can say (``fit_to_derived``)."""
    import json

    from synth.data.constraints import fit_to_derived

    try:
        with open(path, encoding="utf-8") as handle:
            entries = json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise click.BadParameter(f"{path}: not a JSON file of constraints: {exc}", param_hint="--constraints") from None
    if isinstance(entries, dict) and set(entries) == {"constraints"}:
        entries = entries["constraints"]
    if not isinstance(entries, list):
        raise click.BadParameter(f"{path}: expected a JSON list of constraints (or {{\"constraints\": [...]}})",
                                 param_hint="--constraints")
    if derived:
        entries, notes = fit_to_derived(entries, schema)
        for text in notes:
            warn(text)
    return schema.with_constraints(entries)


def _derived_schema(data, epsilon, delta, schema_share, bounds, missing_tokens, columns, seed, config,
                    workload_given):
    """Without --schema: a schema derived under DP with ``schema_share`` of the budget: of its
    rho when the run will compose in zCDP, else of its epsilon and delta (``derive_for_run``)."""
    import numpy as np

    from synth.data.derive import DEFAULT_SCHEMA_SHARE
    from synth.engines.registry import derive_for_run
    from synth.privacy.accounting import Budget

    if not delta > 0:
        raise click.UsageError("without --schema the schema is derived under DP, which needs --delta > 0 (e.g. "
                               "--delta 1e-9: partition selection keeps a value held by one row with probability at "
                               "most its share); or give --schema with what you know publicly")
    share = DEFAULT_SCHEMA_SHARE if schema_share is None else schema_share
    derived, zcdp = derive_for_run(data, config, Budget(epsilon, delta), share, workload_given=workload_given,
                                   columns=columns.split(",") if columns else None, bounds=bounds,
                                   missing_tokens=missing_tokens,
                                   rng=None if seed is None else np.random.default_rng([seed, 2]))
    part = "rho (the run composes in zCDP)" if zcdp else "epsilon and delta"
    note(f"no --schema: deriving one under DP with {share:g} of the budget's {part} (--schema-share); give --schema "
         "(a partial one is fine, through synth schema infer --epsilon --schema) or --bounds for what you know "
         "publicly")
    for line in derived.describe():
        note(line)
    return derived


#: A synthetic table from the default row count larger than this must be asked for by size.
LARGE_TABLE_BYTES = 10**9
#: ... and one of more than this many rows from a noisy count too uncertain (``check_noisy_count``).
NOISY_TABLE_ROWS = 100_000


def check_noisy_count(rows: float, noise_sd: float | None, sample_rows: int | None,
                      option: str = "--sample-rows") -> None:
    """Warn when the noise of the row count a run bought (``noise_sd``, its standard deviation,
    from the budget spent on it; None: n was public) passes ``NOISY_COUNT_FRACTION`` of the
    count ``rows``; refuse such a count as the size of a table of more than ``NOISY_TABLE_ROWS``
    rows that nobody asked for by size (``--epsilon 1e-6`` on 300 rows drew 14.7 million: where
    n is far below the noise, the count is the noise, and 10% of it is 10 standard deviations,
    which it all but never passes). Reads only the released count and public parameters
    (post-processing), never the true n."""
    from synth.privacy.row_count import NOISY_COUNT_FRACTION

    if noise_sd is None or not noise_sd > NOISY_COUNT_FRACTION * rows:
        return
    noise = (f"noise of standard deviation {noise_sd:,.0f} ({noise_sd / rows:.0%} of it, more than "
             f"{NOISY_COUNT_FRACTION:.0%})")
    fixes = "give n with --rows if it is public, or spend more on the count (--count-epsilon, or a larger --epsilon)"
    if sample_rows is None and rows > NOISY_TABLE_ROWS:
        raise click.ClickException(f"the synthetic table would have {rows:,.0f} rows: n, a noisy count with {noise}; "
                                   f"pass {option} N to choose the table's size, or {fixes}")
    warn(f"the noisy row count n={rows:,.0f} has {noise}: the release is scaled by a count that uncertain; {fixes}")


def check_table_size(schema, rows: int, source: str, option: str = "--sample-rows") -> None:
    """Refuse a synthetic table of more than ``LARGE_TABLE_BYTES`` whose size nobody asked for:
    a mistyped n would otherwise start writing gigabytes. Reads no data."""
    from synth.models.synthetic import estimated_row_bytes

    size = estimated_row_bytes(schema) * rows
    if size > LARGE_TABLE_BYTES:
        raise click.UsageError(f"the synthetic table would have {rows:,} rows ({source}), about {size / 1e9:,.1f} GB: "
                               f"pass {option} {rows} to write it, or ask for fewer rows")


def _check_blr_options(mechanism, net, prior, prior_share, prior_model, alpha) -> str:
    """The BLR net (exact without a prior, sampled with one) after refusing prior options that do
    not fit together; other mechanisms' refusals are ``_check_options``'s."""
    if mechanism != "blr":
        given = [name for name, value in (("--net", net), ("--prior", prior), ("--prior-share", prior_share),
                                          ("--prior-model", prior_model)) if value is not None]
        if given:
            raise click.UsageError(f"{', '.join(given)} do(es) not apply to --mechanism {mechanism}")
        return "exact"
    if prior is not None and prior_model is not None:
        raise click.UsageError("give --prior or --prior-model, not both")
    if net is None:
        net = "sampled" if prior is not None or prior_model is not None else "exact"
    if net == "exact" and (prior is not None or prior_model is not None):
        raise click.UsageError(f"{'--prior' if prior else '--prior-model'} applies to --net sampled (the exact net "
                               "holds every database)")
    if prior_share is not None and (prior_model is not None or prior == "uniform"):
        raise click.UsageError("--prior-share applies to --prior mwem or pmw (the share of epsilon they get)")
    if alpha is not None and net == "sampled" and prior != "uniform":
        raise click.UsageError("--alpha applies to --net exact or --prior uniform (a prior's net takes --net-size)")
    return net


def _check_selection(mechanism, selection, rounds, select_share, average, measure) -> None:
    """--selection is MWEM's, and adaptive rounds take none of classic MWEM's round options."""
    if selection == "auto":
        return
    if mechanism != "mwem":
        raise click.UsageError(f"--selection does not apply to --mechanism {mechanism}")
    classic = [name for name, used in (("--rounds", rounds is not None), ("--select-share", select_share is not None),
                                       ("--average", average), ("--measure query", measure != "marginal")) if used]
    if selection == "adaptive" and classic:
        raise click.UsageError(f"{', '.join(classic)} apply to --selection classic (adaptive rounds follow from the "
                               "budget)")


#: generate's flags that set a field of an engine's config: a flag applies to a mechanism
#: whose config has the field (``--delta`` is the budget's: every mechanism but blr).
FLAG_FIELDS = {"--rounds": "rounds", "--select-share": "select_share", "--average": "output", "--measure": "measure",
               "--net-size": "net_size", "--candidates": "candidates", "--max-net": "max_net",
               "--updates": "updates", "--passes": "passes", "--alpha": "alpha", "--variant": "variant",
               "--test": "test", "--representation": "representation", "--max-model-cells": "max_model_cells",
               "--noise": "noise"}


def _check_options(mechanism, delta, rounds, select_share, average, net, net_size, candidates, max_net, updates,
                   measure, passes, alpha, variant="practical", test_kind="auto", representation="auto",
                   max_model_cells=None, noise="auto") -> None:
    """Refuse options that belong to another mechanism rather than ignoring them silently."""
    from synth.engines.registry import options_of

    given = {
        "--rounds": rounds is not None, "--select-share": select_share is not None, "--average": average,
        "--measure": measure != "marginal", "--net-size": net_size is not None,
        "--candidates": candidates is not None, "--max-net": max_net is not None, "--updates": updates is not None,
        "--delta": delta > 0, "--passes": passes is not None, "--alpha": alpha is not None,
        "--variant": variant != "practical", "--test": test_kind != "auto",
        "--representation": representation != "auto", "--max-model-cells": max_model_cells is not None,
        "--noise": noise != "auto",
    }
    fields = set(options_of(mechanism))
    applies = {flag: field in fields for flag, field in FLAG_FIELDS.items()} | {"--delta": mechanism != "blr"}
    foreign = [name for name, used in given.items() if used and not applies[name]]
    if foreign:
        raise click.UsageError(f"{', '.join(foreign)} do(es) not apply to --mechanism {mechanism}")
    if noise == "gaussian" and not delta > 0:
        raise click.UsageError("--noise gaussian accounts in rho-zCDP: it needs --delta > 0")
    if candidates is not None and net != "sampled":
        raise click.UsageError("--candidates applies to --net sampled")
    if max_net is not None and net != "exact":
        raise click.UsageError("--max-net applies to --net exact")
    if test_kind != "auto" and variant == "theory":
        raise click.UsageError("--test applies to --variant practical")
    if average and representation == "factored":
        raise click.UsageError("--average needs --representation dense (it averages the rounds' dense arrays)")


#: generate's parameters that set a field of the engine's config (parameter -> field).
CONFIG_FIELDS = {"noise": "noise", "selection": "selection", "rounds": "rounds", "measure": "measure",
                 "select_share": "select_share", "passes": "passes", "average": "output", "net": "net",
                 "prior": "prior", "prior_share": "prior_share", "net_size": "net_size", "candidates": "candidates",
                 "max_net": "max_net", "alpha": "alpha", "updates": "updates", "variant": "variant",
                 "test_kind": "test", "beta": "beta", "representation": "representation",
                 "max_model_cells": "max_model_cells"}


def _config(mechanism, public_rows, share, prior_model):
    """The engine's config from the command's options (every option checked), and its other
    public inputs (a prior model)."""
    from synth.engines.registry import make_config, options_of
    from synth.errors import SynthError

    params = click.get_current_context().params
    fields = set(options_of(mechanism))
    options = {"rows": public_rows, "count_share": share}
    for name, field in CONFIG_FIELDS.items():
        value = params[name]
        if field in fields and value is not None:
            options[field] = ("average" if value else "last") if name == "average" else value
    inputs = {}
    if prior_model is not None:
        from synth.models.model import Model

        options.pop("prior", None)
        inputs = {"prior_model": Model.load(prior_model), "prior_source": prior_model}
    try:
        return make_config(mechanism, **options), inputs
    except (TypeError, ValueError) as exc:
        if isinstance(exc, SynthError):
            raise
        raise click.UsageError(str(exc)) from None


def _engine(mechanism, schema, workload, epsilon, delta, public_rows, share, prior_model, derivation=None):
    """The engine the command's options ask for and its budget (after a derivation's part),
    with its public plan's checks of the budget, before any data is read."""
    from synth.engines.registry import budget_after, make_engine
    from synth.errors import SynthError
    from synth.privacy.accounting import Budget

    config, inputs = _config(mechanism, public_rows, share, prior_model)
    try:
        engine = make_engine(config, schema, workload, **inputs)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, SynthError):
            raise
        raise click.UsageError(str(exc)) from None
    budget = Budget(epsilon, delta)
    if derivation is not None:
        engine, budget = budget_after(derivation, engine, budget)
    engine.plan(budget)
    return engine, budget


#: A run estimated to take at least this long says so before it starts.
ESTIMATE_AFTER_SECONDS = 10.0


def _count_share(count_epsilon, epsilon) -> float:
    from synth.privacy.row_count import DEFAULT_COUNT_SHARE

    if count_epsilon is None:
        return DEFAULT_COUNT_SHARE
    if count_epsilon >= epsilon:
        raise click.BadParameter(f"{count_epsilon:g} must be less than --epsilon {epsilon:g}",
                                 param_hint="--count-epsilon")
    return count_epsilon / epsilon
