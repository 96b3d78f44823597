"""``synth answer``: answer a workload of counting queries, exactly (non-private) or with PMW,
or, with ``--stream``, PMW's queries one JSON line at a time from stdin."""

from __future__ import annotations

import contextlib
import csv
import json
import signal

import sys

import click

from ._common import (
    load_workload,
    BETA,
    DELTA,
    EPSILON,
    CheckedFloat,
    bad_rows_option,
    columns_option,
    flush_stdout,
    load_schema,
    note,
    one_line,
    output_folder_exists,
    output_option,
    progress,
    max_model_cells_option,
    quiet_option,
    representation_option,
    seed_option,
    storage_options,
    test_option,
    variant_option,
    warn,
    warn_if_inferred,
    warn_if_large_delta,
    write_output,
)
from ._outputs import check_outputs, force_option

NON_PRIVATE_LABEL = "exact (NON-PRIVATE)"


@click.command()
@click.argument("data", required=False, type=click.Path(exists=True, dir_okay=True))
@click.option("--schema", "schema_file", type=click.Path(exists=True, dir_okay=False),
              help="Schema JSON, or a private-pgm domain file {column: size} (not needed with --model).")
@click.option("--workload", "workload_file", type=click.Path(exists=True, dir_okay=False),
              help="Workload JSON (docs/formats.md). Default: every 3-way marginal of the columns, as in the Python "
                   "API (the run says so). With --stream it only declares the column subsets to plan for (L, the "
                   "warm start; none by default); its queries are not answered.")
@click.option("--exact", is_flag=True,
              help="Exact counts from the private data: NOT differentially private, for the data owner only.")
@click.option("--mechanism", type=click.Choice(["pmw"]), help="Private mechanism: pmw (Private Multiplicative Weights).")
@click.option("--model", "from_model", type=click.Path(exists=True, dir_okay=False),
              help="Answer from this released model (any engine): post-processing, no data, no budget.")
@click.option("--epsilon", type=EPSILON, help="Privacy budget epsilon (total, for the whole run).")
@click.option("--delta", type=DELTA, default=0.0, show_default=True, help="Privacy budget delta.")
@click.option("--beta", type=BETA, default=0.05, show_default=True,
              help="Failure probability of each stated error bound (and of the theory plan's accuracy).")
@click.option("--rows", type=click.IntRange(1, 2**63 - 1), help="Row count n, if it is PUBLIC knowledge (else a noisy count is bought).")
@click.option("--count-epsilon", type=CheckedFloat("check_epsilon", "count-epsilon"),
              help="Epsilon for the noisy row count when n is not public (default 5% of --epsilon).")
@click.option("--updates", type=click.IntRange(1),
              help="PMW's update bound L (practical default: one update per column subset of the workload, at "
                   "most MWEM's round count; when that covers every subset, all are measured before the first "
                   "answer and no update is planned, else 90% of it are rounds that measure the subsets the "
                   "model fits worst before the first answer; given, every update is a test's; theory: planned).")
@click.option("--alpha", type=CheckedFloat("check_epsilon", "alpha"), help="Fix PMW's target accuracy alpha (fraction of n) instead of planning it.")
@click.option("--passes", type=click.IntRange(1), default=1, show_default=True, help="Feed the workload this many times.")
@click.option("--plan", "plan_only", is_flag=True, help="Print PMW's plan and exit, without reading the data.")
@click.option("--stream", is_flag=True,
              help="pmw: read one JSON query per line from stdin and write one JSON answer per line to stdout "
                   "({query_id, answer, round, epsilon_spent}), each at once, so queries can be chosen adaptively.")
@click.option("--queries", "stream_queries", type=click.IntRange(1),
              help="--stream: end after N answers (--variant theory needs it: its plan is made for N queries).")
@variant_option
@test_option
@representation_option
@max_model_cells_option
@click.option("--monitor", "monitor_file", type=click.Path(dir_okay=False, writable=True),
              callback=output_folder_exists, help="Write PMW's KL-potential monitor here (NON-PRIVATE diagnostic).")
@click.option("--save-model", "model_file", type=click.Path(dir_okay=False, writable=True),
              callback=output_folder_exists, help="Save the released model (distribution, schema, privacy spent, round log).")
@bad_rows_option
@seed_option
@columns_option
@quiet_option
@force_option
@output_option("Where to write the answers CSV")
def answer(data, schema_file, workload_file, exact, mechanism, from_model, epsilon, delta, beta, rows, count_epsilon, updates,
           alpha, passes, plan_only, stream, stream_queries, variant, test_kind, representation, max_model_cells,
           monitor_file, model_file, bad_rows, seed, columns, quiet, force, output) -> None:
    """Answer every query of a workload on DATA, exactly or privately, or from a model.

    With --exact the answers are the true counts: NOT differentially private, for the data
    owner only. With --mechanism pmw they are differentially private within --epsilon
    (and --delta): the CSV has query_id, name, query, answer (a count), error_bound (the true
    count is within it of the answer with probability 1 - --beta), round (lazy, update or
    halted) and final_answer (from the final model).
    With --model the answers come from a released model (pmw, mwem or blr) without the data:
    post-processing, so they cost no privacy; the model's schema is used.

    With --mechanism pmw --stream the queries come from stdin, one JSON object per line in the
    workload's query form ({"where": {...}}, optionally with "query_id"), and each answer is
    written to stdout as one JSON line as soon as it is made, with its error_bound. A bad line gets {"query_id",
    "error"} and the stream goes on. End of input (Ctrl-D), Ctrl-C or --queries N ends it with
    a summary on stderr; --save-model and --monitor are written then. After L updates PMW halts:
    it keeps answering from its model (round "halted"), spending nothing more.

    \b
    Examples:
      synth answer adult.csv --schema adult-domain.json --workload w.json --exact -o exact.csv
      synth answer adult.csv --schema adult-domain.json --workload w.json \\
          --mechanism pmw --epsilon 1 --delta 1e-6 --rows 48842 -o pmw.csv --save-model pmw.npz
      synth answer --schema adult-domain.json --workload w.json --mechanism pmw \\
          --epsilon 1 --rows 48842 --plan
      synth answer --model mwem.npz --workload new-queries.json -o answers.csv
      synth answer demo.csv --schema demo-schema.json --mechanism pmw --epsilon 1 --stream < queries.jsonl
    """
    if exact + bool(mechanism) + bool(from_model) != 1:
        raise click.UsageError("choose one: --exact (NON-PRIVATE counts), --mechanism pmw (private) or --model M")
    if stream:
        _check_stream_options(mechanism, plan_only, passes, output, variant, stream_queries)
    elif stream_queries is not None:
        raise click.UsageError("--queries applies to --stream only (a workload run answers the workload's queries)")
    if not mechanism and (representation != "auto" or max_model_cells is not None):
        raise click.UsageError("--representation and --max-model-cells apply to --mechanism pmw")
    check_outputs({"DATA": data, "--schema": schema_file, **({"--workload": workload_file} if workload_file else {}),
                   **({"--model": from_model} if from_model else {})},
                  {"-o": output, "--save-model": model_file, "--monitor": monitor_file}, force)
    if from_model:
        _answer_from_model(data, schema_file, from_model, workload_file, columns, output)
        return
    if schema_file is None:
        raise click.UsageError("Missing option '--schema' (only --model runs without a schema)")
    if data is None and not plan_only:
        raise click.UsageError("DATA is required (only --plan and --model run without reading the data)")

    full, selected = load_schema(schema_file, columns)
    queries = None if stream and workload_file is None else load_workload(workload_file, selected)
    if exact:
        _answer_exactly(data, full, queries, columns, quiet, output, bad_rows)
    else:
        if epsilon is None:
            raise click.UsageError("--mechanism pmw needs --epsilon")
        if test_kind != "auto" and variant == "theory":
            raise click.UsageError("--test applies to --variant practical")
        storage_options(representation, max_model_cells)
        config = _pmw_config(selected, epsilon, rows, count_epsilon, beta, updates, alpha, passes,
                             monitor_file is not None, variant, test_kind, representation, max_model_cells)
        from synth.privacy.accounting import Budget

        budget = Budget(epsilon, delta)
        if stream:
            _answer_stream(data, full, selected, queries, columns, config, budget, stream_queries, monitor_file,
                           model_file, seed, quiet, bad_rows, schema_file)
            return
        _answer_with_pmw(data, full, selected, queries, columns, config, budget, plan_only, monitor_file, model_file,
                         seed, quiet, output, bad_rows, schema_file)


def _pmw_config(schema, epsilon, rows, count_epsilon, beta, updates, alpha, passes, monitor, variant, test_kind,
                representation, max_model_cells):
    """PMW's config from the command's options, checked before any data is read."""
    from synth.engines.pmw import PMWConfig
    from synth.errors import SynthError
    from synth.privacy.row_count import DEFAULT_COUNT_SHARE

    options = {"rows": rows if rows is not None else schema.rows, "beta": beta, "updates": updates, "alpha": alpha,
               "passes": passes, "monitor": monitor, "variant": variant, "test": test_kind,
               "representation": representation,
               "count_share": DEFAULT_COUNT_SHARE if count_epsilon is None else count_epsilon / epsilon}
    if max_model_cells is not None:
        options["max_model_cells"] = max_model_cells
    try:
        return PMWConfig(**options)
    except ValueError as exc:
        if isinstance(exc, SynthError):
            raise
        raise click.UsageError(str(exc)) from None


def _answer_from_model(data, schema_file, model_file, workload_file, columns, output) -> None:
    from synth.models.model import Model

    if data is not None:
        raise click.UsageError("--model answers without the data: drop DATA")
    if schema_file is not None or columns:
        raise click.UsageError("--model carries its own schema: drop --schema and --columns")
    model = Model.load(model_file)
    queries = load_workload(workload_file, model.schema)
    answers = model.answer(queries)
    spent = model.privacy.get("spent", {})
    label = f"post-processing of a {model.mechanism} release (epsilon={spent.get('epsilon', float('nan')):.6g})"

    def write(handle) -> None:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["query_id", "name", "query", "answer", "privacy"])
        for i in range(len(queries)):
            writer.writerow([i, queries[i].name or "", queries.describe(i), f"{answers[i]:.6g}", label])

    write_output(output, write)
    rows = "public" if model.rows_public else "a noisy count"
    note(f"answered {len(queries):,} queries from {model_file} ({model.mechanism}; n={model.rows:,.0f}, {rows}); "
         "no data read, no privacy spent")
    if model.seeded:
        warn(f"{model_file} comes from a seeded run: for testing only, not for release")


def _answer_exactly(data, full, queries, columns, quiet, output, bad_rows) -> None:
    from synth.data.exact import exact_answers

    with progress(f"reading {data}", quiet, "rows") as update:
        result = exact_answers(data, full, queries, columns=columns, progress=update, bad_rows=bad_rows)

    def write(handle) -> None:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["query_id", "name", "query", "answer", "privacy"])
        for i, value in enumerate(result.answers.tolist()):
            writer.writerow([i, queries[i].name or "", queries.describe(i), value, NON_PRIVATE_LABEL])

    write_output(output, write)
    for name, count in result.clipped.items():
        note(f"column {name!r}: {count:,} rows outside the bin edges were clipped into the edge bins")
    if result.dropped:
        note(f"{result.dropped:,} rows outside the schema were left out (--bad-rows drop) [NON-PRIVATE]")
    warn(
        f"exact answers to {len(queries):,} queries over {result.n_rows:,} rows are NON-PRIVATE "
        "(not differentially private): for the data owner only; do not release them."
    )


def _answer_with_pmw(data, full, selected, queries, columns, config, budget, plan_only, monitor_file, model_file,
                     seed, quiet, output, bad_rows, schema_file) -> None:
    from synth.engines.pmw_plan import plan_pmw

    epsilon, delta, c = budget.epsilon, budget.delta, config
    variant, public_rows = c.variant, c.rows
    if plan_only:
        if public_rows is None:
            raise click.UsageError("--plan needs a public row count: pass --rows N or put rows in the schema")
        if variant == "practical":
            from synth.engines.pmw import PMWEngine

            plan = PMWEngine(config, selected, queries).practical_plan(budget, public_rows, queries.subsets)
        else:
            plan = plan_pmw(epsilon, delta, public_rows, selected.universe_size, len(queries) * c.passes, c.beta,
                            updates=c.updates, alpha=c.alpha)
        click.echo(plan.describe())
        return
    from synth.data.reading import read
    from synth.engines.pmw import HALTED, PMWEngine

    warn_if_inferred(selected, schema_file)
    warn_if_large_delta(delta, public_rows)
    with progress(f"reading {data}", quiet, "rows", private=public_rows is None) as update:
        encoded = read(data, full, columns=columns, progress=update, bad_rows=bad_rows)
    with progress("pmw", quiet) as update:
        run = PMWEngine(config, selected, queries).record(encoded.codes, budget, seed, update)

    def write(handle) -> None:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["query_id", "name", "query", "answer", "error_bound", "round", "final_answer", "privacy"])
        for i in range(len(queries)):
            writer.writerow([i, queries[i].name or "", queries.describe(i), f"{run.answers[i]:.6g}",
                             f"{run.bounds[i]:.6g}", run.rounds[i], f"{run.final[i]:.6g}",
                             "differentially private (pmw)"])

    from synth._io import output_group

    with output_group() as outputs:
        write_output(output if output == "-" else outputs.stage(output), write)
        if model_file:
            run.pmw.to_model(seeded=seed is not None).save(outputs.stage(model_file))
        if monitor_file:
            with open(outputs.stage(monitor_file), "w", encoding="utf-8", newline="") as handle:
                run.monitor.write_csv(handle)
    if monitor_file:
        warn(f"{monitor_file} is a NON-PRIVATE diagnostic computed from the true data: never release it")
    for line in run.notes:
        note(line)
    spent = run.accountant.spent()
    plan = run.plan
    note(f"PMW ({variant}): {run.pmw.updates_text()}; rounds: "
         + ", ".join(f"{k} {v:,}" for k, v in run.pmw.rounds.items()))
    _note_storage(run.pmw, selected)
    note(f"privacy spent: epsilon={spent.epsilon:.6g}, delta={spent.delta:g} ({spent.method} composition) "
         f"of epsilon={epsilon:g}, delta={delta:g}")
    if variant == "theory":
        note(f"predicted accuracy: alpha={plan.alpha:.5f} of n (~{plan.alpha * plan.rows:,.0f} rows) for answers "
             f"before the halt, with probability >= {1 - plan.failure_bound:.3f}")
    else:
        note(f"threshold T={plan.threshold_count:,.0f} rows; final_answer comes from the release (the estimate fit "
             "once more to every measurement), answer from the estimate when the query came")
    if not run.learned:
        warn("PMW made no update: every answer is the starting distribution's"
             + (" (see the plan's NOTE; --plan shows it without reading the data)" if variant == "theory" else ""))
    if run.pmw.rounds[HALTED]:
        warn(f"PMW halted after L={plan.updates:,} updates: {run.pmw.rounds[HALTED]:,} answers came from its model; "
             "their error_bound is a measurement's where one covers the query, else only the range [0, n]")
    if model_file:
        note(f"model saved to {model_file}")


def _note_storage(pmw, schema) -> None:
    """How D was stored, and the queries a factored D's cap left lazy."""
    from synth.engines.release import describe_representation

    note(describe_representation(pmw.representation, pmw.model_cells, schema.universe_size))
    if pmw.capped:
        warn(f"{pmw.capped:,} queries were answered lazily (round 'lazy (model cap)') because their update would "
             "grow the model past --max-model-cells")


# -- --stream: PMW online, one JSON line in, one JSON line out ------------------------------------


def _check_stream_options(mechanism, plan_only, passes, output, variant, stream_queries) -> None:
    """Refuse, before any work, what --stream cannot do."""
    if not mechanism:
        raise click.UsageError("--stream works with --mechanism pmw only (--exact and --model answer a workload file)")
    if plan_only:
        raise click.UsageError("--plan prints a workload run's plan: drop --stream (the stream's plan is printed "
                               "on stderr when it starts)")
    if passes != 1:
        raise click.UsageError("--passes feeds a workload file again: drop it with --stream")
    if output != "-":
        raise click.UsageError("--stream writes its answers to stdout: drop -o (redirect stdout instead)")
    if variant == "theory" and stream_queries is None:
        raise click.UsageError("--stream --variant theory needs --queries N: the textbook plan is made for a "
                               "stream of N queries")


def _answer_stream(data, full, selected, workload, columns, config, budget, limit, monitor_file, model_file, seed,
                   quiet, bad_rows, schema_file) -> None:
    from synth._io import output_group
    from synth.data.reading import read
    from synth.engines.pmw import HALTED, PMWEngine

    epsilon, delta, variant, public_rows = budget.epsilon, budget.delta, config.variant, config.rows
    warn_if_inferred(selected, schema_file)
    warn_if_large_delta(delta, public_rows)
    with progress(f"reading {data}", quiet, "rows", private=public_rows is None) as update:
        encoded = read(data, full, columns=columns, progress=update, bad_rows=bad_rows)
    opened = PMWEngine(config, selected).open(encoded.codes, budget, seed,
                                              subsets=workload.subsets if workload is not None else (), queries=limit)
    pmw, plan, accountant = opened.pmw, opened.plan, opened.accountant
    for line in opened.notes:
        note(line)
    declared = f" for the workload's {len(workload.subsets):,} column subsets" if workload is not None else ""
    if workload is not None and variant == "practical" and not plan.updates:
        declared += (", each measured before the first query (a query on another subset is answered from the "
                     "model, round halted)")
    elif variant == "practical" and plan.selected:
        declared += (f", the {pmw.selected:,} it fit worst (chosen by the exponential mechanism) measured before the "
                     "first query")
    note(f"PMW ({variant}) ready{declared}: L={plan.updates:,} updates, epsilon={epsilon:g}, delta={delta:g} "
         f"(spent so far: epsilon={accountant.spent().epsilon:.6g}); reading one JSON query per line from stdin, "
         "answers on stdout")
    tally = _serve(pmw, selected, accountant, limit)

    if model_file or monitor_file:
        with output_group() as outputs:
            if model_file:
                pmw.to_model(seeded=seed is not None).save(outputs.stage(model_file))
            if monitor_file:
                with open(outputs.stage(monitor_file), "w", encoding="utf-8", newline="") as handle:
                    opened.monitor.write_csv(handle)
    spent = accountant.spent()
    note(f"stream ended ({tally.reason}): {tally.answers:,} answer{'s' * (tally.answers != 1)}, "
         f"{tally.errors:,} error line{'s' * (tally.errors != 1)}")
    note(f"PMW ({variant}): {pmw.updates_text()}; rounds: "
         + ", ".join(f"{k} {v:,}" for k, v in pmw.rounds.items()))
    _note_storage(pmw, selected)
    note(f"privacy spent: epsilon={spent.epsilon:.6g}, delta={spent.delta:g} ({spent.method} composition) "
         f"of epsilon={epsilon:g}, delta={delta:g}")
    if pmw.rounds[HALTED]:
        warn(f"PMW halted after L={plan.updates:,} updates: {pmw.rounds[HALTED]:,} answers came from its model "
             "(no budget spent); their error_bound is a measurement's where one covers the query, else only the "
             "range [0, n]")
    if monitor_file:
        warn(f"{monitor_file} is a NON-PRIVATE diagnostic computed from the true data: never release it")
    if model_file:
        release = (" (the release is the estimate fit once more to every measurement: its answers may differ a "
                   "little from the stream's)")
        note(f"model saved to {model_file}" + (release if variant == "practical" else ""))
    if tally.broken_pipe:
        raise BrokenPipeError  # the reader went away: the files are written, exit as every command does


class _Tally:
    """What a stream did: answers, error lines, why it ended."""

    def __init__(self) -> None:
        self.answers = 0
        self.errors = 0
        self.reason = "end of input"
        self.broken_pipe = False


def _serve(pmw, schema, accountant, limit) -> _Tally:
    """Answer stdin's lines on stdout until end of input, Ctrl-C, ``limit`` answers or an
    exhausted budget; every line written is flushed at once."""
    from synth.privacy.accounting import BudgetExceeded
    from synth.engines.pmw import HALTED

    source = sys.stdin.buffer
    sink = sys.stdout
    tally = _Tally()
    position = 0  # a line's default query_id: 0, 1, 2... over the non-blank lines
    said_halted = False
    with _interrupt_between_lines() as interrupt:
        while True:
            try:
                with interrupt.reading():
                    raw = source.readline(MAX_LINE_BYTES + 1)
                    too_long = len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n")
                    while too_long and raw and not raw.endswith(b"\n"):
                        raw = source.readline(MAX_LINE_BYTES)  # skip the rest of an over-long line
            except KeyboardInterrupt:
                tally.reason = "interrupted"
                break
            if not raw:
                break
            interrupt.lines += 1
            if interrupt.lines == 1 and raw.startswith(_BOM):
                raw = raw[len(_BOM):]  # a byte-order mark (some Windows tools write one) is not content
            if not raw.strip():
                continue
            try:
                if too_long:
                    record = {"query_id": position,
                              "error": f"line {interrupt.lines}: longer than {MAX_LINE_BYTES:,} bytes: skipped"}
                else:
                    record = _answer_line(pmw, schema, accountant, raw, interrupt.lines, position)
            except BudgetExceeded as exc:
                record = {"query_id": position, "error": one_line(f"line {interrupt.lines}: budget exhausted: {exc}")}
                tally.reason = "budget exhausted"
            position += 1
            try:
                sink.write(json.dumps(record) + "\n")
                flush_stdout(sink)
            except BrokenPipeError:
                tally.reason, tally.broken_pipe = "stdout closed", True
                break
            tally.errors += "error" in record
            tally.answers += "answer" in record
            if record.get("round") == HALTED and not said_halted:
                said_halted = True
                note(f"PMW halted after L={pmw.plan.updates:,} updates: later answers come from its model and "
                     "spend nothing; their error_bound is a measurement's where one covers the query, else only "
                     "the range [0, n]")
            if tally.reason == "budget exhausted":
                break
            if limit is not None and tally.answers >= limit:
                tally.reason = f"--queries {limit:,} answered"
                break
            if interrupt.requested:
                tally.reason = "interrupted"
                break
    return tally


class _Interrupt:
    """Ctrl-C (SIGINT) for a stream: it stops a wait for the next line at once, but a query
    being answered is finished and written first (an update is never cut in half)."""

    def __init__(self) -> None:
        self.waiting = False
        self.requested = False
        self.lines = 0

    def handle(self, signum, frame) -> None:
        self.requested = True
        if self.waiting:
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def reading(self):
        if self.requested:
            raise KeyboardInterrupt
        self.waiting = True
        try:
            yield
        finally:
            self.waiting = False


@contextlib.contextmanager
def _interrupt_between_lines():
    interrupt = _Interrupt()
    try:
        previous = signal.signal(signal.SIGINT, interrupt.handle)
    except ValueError:  # not in the main thread: Ctrl-C is not ours to handle
        yield interrupt
        return
    try:
        yield interrupt
    finally:
        signal.signal(signal.SIGINT, previous)


#: The longest stream line read (1 MiB): a longer one is skipped with an error object.
MAX_LINE_BYTES = 1 << 20
#: The longest string query_id, in characters, and the largest integer one (in absolute value): an
#: id is echoed on every answer, so it is kept to a sane size.
MAX_ID_CHARS = 200
MAX_ID = 2**63 - 1
_BOM = "\ufeff".encode("utf-8")


def _answer_line(pmw, schema, accountant, raw: bytes, number: int, position: int) -> dict:
    """One input line's output object: the answer, or ``{"query_id", "error"}``."""
    from synth._io import DuplicateKey, no_duplicate_keys
    from synth.privacy.accounting import BudgetExceeded
    from synth.errors import SynthError
    from synth.data.workload import parse_query

    def error(message: str, query_id=position) -> dict:
        return {"query_id": query_id, "error": one_line(f"line {number}: {message}")}

    try:
        item = json.loads(raw.decode("utf-8"), object_pairs_hook=no_duplicate_keys)
    except UnicodeDecodeError:
        return error("not UTF-8 text")
    except json.JSONDecodeError as exc:
        return error(f"not valid JSON ({exc.msg} at column {exc.colno})")
    except RecursionError:
        return error("not valid JSON (nested too deeply)")
    except DuplicateKey as exc:
        return error(f"key {_shorten(exc.args[0])!r} appears twice in one JSON object")
    except ValueError:  # an integer of more than 4,300 digits (Python's limit on int conversion)
        return error("not valid JSON (a number with thousands of digits)")
    if not isinstance(item, dict):
        return error(f"expected a JSON object like {{\"where\": {{\"column\": \"value\"}}}}, got {_kind(item)}")
    query_id = item.pop("query_id", position)
    if isinstance(query_id, bool) or not isinstance(query_id, (int, str)):
        return error(f"query_id must be an integer or a string, got {_kind(query_id)}")
    if isinstance(query_id, int) and abs(query_id) > MAX_ID:
        return error(f"query_id {_shorten(str(query_id))} is out of range (at most {MAX_ID:,} in absolute value)")
    if isinstance(query_id, str) and len(query_id) > MAX_ID_CHARS:
        return error(f"query_id {_shorten(query_id)!r} is longer than {MAX_ID_CHARS} characters")
    unknown = sorted(set(item) - {"name", "where"})
    if unknown:
        return error(f"unknown key {unknown[0]!r}; allowed: query_id, name, where", query_id)
    try:
        query = parse_query(item, schema, source=f"line {number}", index=query_id)
    except (SynthError, TypeError, ValueError) as exc:
        return {"query_id": query_id, "error": one_line(str(exc))}
    label = " AND ".join(schema[c].describe(a) for c, a in zip(query.columns, query.allowed)) or "all rows"
    try:
        result = pmw.answer(query, query_id=position, label=label)
    except BudgetExceeded:
        raise
    except SynthError as exc:
        return {"query_id": query_id, "error": one_line(f"line {number}: {exc}")}
    except MemoryError:
        return error("out of memory answering this query: the stream goes on without it", query_id)
    return {"query_id": query_id, "answer": float(result.value), "error_bound": float(result.bound),
            "round": result.round, "epsilon_spent": float(accountant.spent().epsilon)}


def _kind(item) -> str:
    return {list: "a list", dict: "an object", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(item), "a number")


def _shorten(text: str, keep: int = 40) -> str:
    """A long text cut to its first ``keep`` characters, saying how long it was."""
    return text if len(text) <= keep else f"{text[:keep]}... ({len(text):,} characters)"
