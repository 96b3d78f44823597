"""The planned scan at 10^6 to 10^8 rows: throughput, peak memory and time against n, for CSV,
a Parquet folder and Dask, each beside pandas reading the same file in the same run.

The table: a seeded generator (``write_table``) writes n rows of 8 integer-coded columns
(domains 2, 3, 5, 8, 10, 16, 20, 50; each column copies the previous one modulo its size half
the time, so the marginals are not uniform) as a CSV and as a folder of Parquet files of 10^7
rows each, under the system's temp folder (``<tmp>/synth-bench-scan/<n>``; written once, kept
for later runs; delete the folder to reclaim the disk: 10^8 rows take about 2 GB of CSV).
The scan counts the tables of all 28 two-way marginals.

Each measured step runs in a fresh Python process, which reports its own wall time and peak
resident memory (``ru_maxrss``): the in-process scan (``synth.data.reading.scan``) of the CSV (and of
the CSV with every line through pandas' parser, ``synth.data.reading.PLAIN_CSV = False``) and of the
Parquet folder; ``pandas.read_csv`` / ``pandas.read_parquet`` of the same 8 columns (only
where the frame fits in a third of the machine's memory); the Dask scan on a local cluster of
2 workers (``synth.data.dask_scan.scan_dask``, cluster start-up excluded); and, at the largest n,
the whole ``synth generate`` (MWEM, eps 1, n noisy, the 7 pairs of neighbouring columns, a
factored model: a dense fit of this 38-million-cell universe takes minutes, and is not what
is measured here; ``--sample-rows 1000000``: sampling holds one block of rows whatever their
number) on each input, with the cluster started by ``--scheduler local`` included for the Dask
one. The three synthetic tables are then compared byte for byte (same seed, same tables in).

Usage: ``python benchmarks/bench_scan.py [--quick] [--rows 1e6,1e7,1e8] [--no-write]``
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
from _harness import REPO, session
from _report import markdown_table

from synth.data.schema import Coded, Schema
from synth.data.workload import Workload

SECTION = "bench_scan"
SIZES = (2, 3, 5, 8, 10, 16, 20, 50)
NAMES = tuple(f"c{i}" for i in range(len(SIZES)))
ROWS, QUICK_ROWS = (10**6, 10**7), (10**6,)
WRITE_CHUNK = 10**6
PARQUET_FILE_ROWS = 10**7
FORMAT_VERSION = 2  # bump when the generator changes: old folders are then rewritten


def table_folder(n: int) -> Path:
    return Path(tempfile.gettempdir()) / "synth-bench-scan" / f"v{FORMAT_VERSION}-{n}"


def write_table(n: int) -> Path:
    """The n-row table (CSV, Parquet folder, schema, workload) in ``table_folder(n)``."""
    folder = table_folder(n)
    if (folder / "done").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    parts = folder / "parquet"
    parts.mkdir(exist_ok=True)
    rng = np.random.default_rng([20261123, n])
    with open(folder / "data.csv", "w", newline="") as handle:
        handle.write(",".join(NAMES) + "\n")
        file_rows, file_index, pieces = 0, 0, []
        for start in range(0, n, WRITE_CHUNK):
            m = min(WRITE_CHUNK, n - start)
            previous = rng.integers(0, SIZES[0], m)
            columns = {}
            for name, size in zip(NAMES, SIZES):
                values = np.where(rng.random(m) < 0.5, previous % size, rng.integers(0, size, m)).astype(np.int64)
                columns[name] = previous = values
            frame = pd.DataFrame(columns)
            frame.to_csv(handle, index=False, header=False)
            pieces.append(frame)
            file_rows += m
            if file_rows >= PARQUET_FILE_ROWS or start + m == n:
                pd.concat(pieces).to_parquet(parts / f"part-{file_index:04d}.parquet", index=False)
                file_rows, file_index, pieces = 0, file_index + 1, []
    schema = Schema(tuple(Coded(name, size) for name, size in zip(NAMES, SIZES)))
    schema.save(folder / "schema.json")
    Workload.marginals(schema, 2).save(folder / "w2.json")
    chain = [{"marginal": [a, b]} for a, b in zip(NAMES, NAMES[1:])]
    (folder / "chain.json").write_text(json.dumps({"queries": chain}))
    (folder / "done").write_text("ok")
    return folder


#: Synthetic rows each generate writes (sampling holds one block of rows whatever their number;
#: writing 10^8 rows would time the CSV writer, not the scan).
SAMPLE_ROWS = 10**6

STEP = textwrap.dedent("""
    import json, resource, sys, time
    SAMPLE_ROWS = %d
    folder, step = sys.argv[1], sys.argv[2]
    from synth.data.schema import Schema
    from synth.data.workload import Workload
    schema = Schema.load(folder + "/schema.json")
    subsets = Workload.load(folder + "/w2.json", schema).subsets
    names = list(schema.names)
    start = time.perf_counter()
    if step.startswith("scan csv"):
        from synth.data import reading as data
        data.PLAIN_CSV = step == "scan csv"  # "scan csv, pandas parser": every line through pandas
        rows = data.scan(folder + "/data.csv", schema, subsets).n_rows
    elif step == "scan parquet":
        from synth.data.reading import scan
        rows = scan(folder + "/parquet", schema, subsets).n_rows
    elif step == "pandas.read_csv":
        import pandas as pd
        rows = len(pd.read_csv(folder + "/data.csv", usecols=names))
    elif step == "pandas.read_parquet":
        import pandas as pd
        rows = len(pd.read_parquet(folder + "/parquet", columns=names))
    elif step.startswith("dask"):
        from distributed import Client, LocalCluster
        from synth.data.dask_scan import scan_dask
        with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0", silence_logs=50) as cluster, \\
                Client(cluster) as client:
            start = time.perf_counter()  # the cluster's start-up is not the scan's
            source = folder + ("/data.csv" if step.endswith("csv") else "/parquet")
            rows = scan_dask(source, schema, subsets, client=client).n_rows
    else:  # synth generate on an input, in this process
        from synth_cli.main import main
        data = {"generate csv": "/data.csv", "generate parquet": "/parquet", "generate dask": "/data.csv"}[step]
        extra = ["--scheduler", "local"] if step == "generate dask" else []
        output = folder + "/synthetic-" + step.split()[-1] + ".csv"
        args = ["generate", folder + data, "--schema", folder + "/schema.json", "--workload", folder + "/chain.json",
                "--epsilon", "1", "--seed", "1", "--representation", "factored", "--sample-rows", str(SAMPLE_ROWS),
                "-o", output, "--force", "--quiet", *extra]
        try:
            main(args, standalone_mode=False)
        except SystemExit:
            pass
        rows = None
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # the largest ended child's
    print(json.dumps({"seconds": seconds, "peak": peak, "rows": rows, "workers": workers}))
""" % SAMPLE_ROWS)


def measure(folder: Path, step: str) -> dict:
    """One step in a fresh process: its wall time, peak resident bytes and rows read."""
    done = subprocess.run([sys.executable, "-c", STEP, str(folder), step], cwd=REPO, capture_output=True,
                          text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if done.returncode != 0:
        raise RuntimeError(f"{step} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def median_run(runs: list[dict]) -> dict:
    """The median time of a step's runs, with the largest peaks any of them reached."""
    return {"seconds": float(np.median([r["seconds"] for r in runs])), "peak": max(r["peak"] for r in runs),
            "workers": max(r["workers"] for r in runs), "rows": runs[0]["rows"]}


def fits_in_memory(n: int) -> bool:
    """Whether an 8-column int64 frame of n rows (and pandas' parsing buffers) fits in a third of RAM."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return n * 8 * 8 * 2 < total / 3


def add_options(parser) -> None:
    parser.add_argument("--rows", default=None,
                        help="comma-separated table sizes (default 1e6,1e7; add 1e8 for the full run)")


def main(argv=None) -> None:
    bench = session(__doc__, "10^6 rows only", argv, add_options)
    sizes = [int(float(v)) for v in bench.args.rows.split(",")] if bench.args.rows else (
        QUICK_ROWS if bench.quick else ROWS)
    results: dict[tuple[int, str], dict] = {}
    for n in sizes:
        with bench.stage(f"writing the {n:,}-row table (once)"):
            folder = write_table(n)
        timed = ["scan csv", "scan csv, pandas parser", "scan parquet", "dask csv", "dask parquet"]
        if fits_in_memory(n):
            timed += ["pandas.read_csv", "pandas.read_parquet"]
        samples: dict[str, list[dict]] = {step: [] for step in timed}
        for run in range(bench.repeats):  # in turn, so that a slow spell of the machine hits every step alike
            for step in timed:
                with bench.stage(f"{n:,} rows: {step} (run {run + 1} of {bench.repeats})"):
                    samples[step].append(measure(folder, step))
        for step, runs in samples.items():
            results[n, step] = median_run(runs)
        if n == max(sizes):
            for step in ("generate csv", "generate parquet", "generate dask"):
                with bench.stage(f"{n:,} rows: {step}"):
                    results[n, step] = measure(folder, step)
    same = None
    if any(step.startswith("generate") for _, step in results):
        outputs = [(table_folder(max(sizes)) / f"synthetic-{kind}.csv").read_bytes() for kind in ("csv", "parquet", "dask")]
        same = all(output == outputs[0] for output in outputs)
    bench.publish(SECTION, report(bench, sizes, results, same))


def report(bench, sizes, results, same: bool | None) -> str:
    lines = bench.header("The planned scan: CSV, Parquet and Dask against n (bench_scan)", [np, pd],
                         repeats=False)
    lines.append(f"Scans and pandas: the median of {bench.repeats} runs, the steps taken in turn; generate: one "
                 "run. Each step in a fresh process (wall time of the step, the readers' import and Numba's "
                 "cache load included; peak resident memory of that process, the largest of its runs). Scans count all 28 two-way marginals of an 8-column integer-coded table; generate "
                 "is the whole `synth generate` (MWEM, eps 1, n noisy, the 7 neighbouring pairs, factored model, "
                 f"{SAMPLE_ROWS:,} synthetic rows). Dask: a local cluster of 2 single-thread "
                 "worker processes (its start-up excluded from the scans, included in `generate dask`); the "
                 "largest worker's peak is shown beside the main process's.")
    lines.append("")
    table = []
    for (n, step), figure in results.items():
        rate = f"{figure['rows'] / figure['seconds'] / 1e6:.2f} M rows/s" if figure["rows"] else ""
        workers = f"{figure['workers'] / 2**20:,.0f} MiB" if "dask" in step and figure.get("workers") else ""
        table.append([f"{n:,}", step, f"{figure['seconds']:.1f} s", rate, f"{figure['peak'] / 2**20:,.0f} MiB",
                      workers])
    lines.append(markdown_table([("rows", "---:"), ("step", ":---"), ("time", "---:"), ("throughput", "---:"),
                                 ("peak memory", "---:"), ("a Dask worker's peak", "---:")], table))
    lines.append("")
    ratios = []
    for n in sizes:
        get = lambda step: results.get((n, step), {}).get("seconds")  # noqa: E731
        pairs = [("CSV scan / pandas.read_csv", get("scan csv"), get("pandas.read_csv")),
                 ("Parquet scan / CSV scan", get("scan parquet"), get("scan csv")),
                 ("Parquet scan / CSV scan with pandas' parser", get("scan parquet"), get("scan csv, pandas parser")),
                 ("Dask CSV / in-process CSV", get("dask csv"), get("scan csv")),
                 ("Dask Parquet / in-process Parquet", get("dask parquet"), get("scan parquet"))]
        for label, a, b in pairs:
            if a and b:
                ratios.append([f"{n:,}", label, f"{a / b:.2f}"])
    for small, large in zip(sizes, sizes[1:]):
        for step in ("scan csv", "scan parquet"):
            a, b = results[small, step]["seconds"], results[large, step]["seconds"]
            ratios.append([f"{small:,} -> {large:,}", f"{step}: time grows", f"{b / a:.1f}x (rows x{large // small})"])
    lines.append(markdown_table([("rows", "---:"), ("ratio", ":---"), ("value", "---:")], ratios))
    if same is not None:
        lines.append("")
        lines.append(f"The three synthetic tables of {max(sizes):,} rows (generate on the CSV, on the Parquet folder, "
                     f"and through --scheduler local; seed 1): {'byte for byte the same' if same else 'DIFFERENT'}.")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
