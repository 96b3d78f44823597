"""The evaluation report: a folder of CSV, JSON, PNG plots and an HTML page (NON-PRIVATE).

``write_report`` turns a ``synth.report.evaluate.Evaluation`` (and optionally PMW's KL monitor) into a
folder::

    answers.csv               one row per query: true, released, absolute and relative error
    summary.json              the numbers (see ``Evaluation.summary``) and what was compared
    error_distribution.png    histogram of the absolute errors (fractions of n)
    marginal_errors.png       L1 error per marginal (when the release determines any marginal)
    true_vs_released.png      released against true answers (fractions of n), with y = x
    kl_potential.png          with a monitor: the KL potential per update against the theory, the
                              Pythagorean bound, and the epsilon spent (right axis)
    round_timeline.png        with a monitor: which query each update came from, its true error
    column_histograms.png     with a synthetic table: each column's real and synthetic shares
    index.html                all of the above on one page, linked by relative paths

The folder appears whole or not at all: it is built in a hidden temporary folder beside the
target and renamed into place. An existing target is replaced only when it is empty or a
previous report (a ``summary.json`` of this format and nothing but report files); any other
existing folder is refused, so no user file is ever deleted.

Plots are drawn with matplotlib's Agg renderer through its object API (``Figure`` and
``FigureCanvasAgg``), imported only when a report is written: no display, no pyplot global
state, and ``import synth`` stays fast.

Beside the release, the page, summary.json and the plots show two baselines (the product of
the true 1-way marginals, and uniform; see ``synth.report.evaluate.BASELINES``), labelled
NON-PRIVATE. Every number shown goes through ``synth.report.numbers.fmt``.

Every file reads the private data: the report is for the data owner only.
"""

from __future__ import annotations

import csv
import html
import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from synth.engines.monitor import PLAN_PREFIX
from synth.errors import SynthError
from synth.report.evaluate import BASELINES
from synth.report.numbers import COUNT, PRIVACY, fmt

__all__ = [
    "REPORT_FILES",
    "REPORT_FORMAT",
    "MonitorLog",
    "ReportError",
    "check_report_folder",
    "read_monitor",
    "write_report",
]

REPORT_FORMAT = "synth-evaluation"
REPORT_FORMAT_VERSION = 1

ANSWERS = "answers.csv"
SUMMARY = "summary.json"
INDEX = "index.html"
ERROR_PLOT = "error_distribution.png"
MARGINAL_PLOT = "marginal_errors.png"
SCATTER_PLOT = "true_vs_released.png"
KL_PLOT = "kl_potential.png"
TIMELINE_PLOT = "round_timeline.png"
HISTOGRAM_PLOT = "column_histograms.png"
#: Every file a report may hold (a folder with anything else is not replaced).
REPORT_FILES = (ANSWERS, SUMMARY, INDEX, ERROR_PLOT, MARGINAL_PLOT, SCATTER_PLOT, KL_PLOT, TIMELINE_PLOT,
                HISTOGRAM_PLOT)

HEADER_TEXT = ("NON-PRIVATE: this report READS THE PRIVATE DATA. It compares the released answers with exact "
               "answers computed from the true data, so every number and plot here is for the data owner only; "
               "never publish or share it.")
BASELINE_TEXT = ("The two baselines are scored as the release is: the product of the true 1-way marginals is what "
                 "a release would get knowing only each column alone (each column's true distribution, the columns "
                 "independent), and uniform is what it would get knowing nothing (every cell of a marginal equally "
                 "likely). Both are computed from the true data: NON-PRIVATE, for the data owner only. A release "
                 "that does not beat the first has learned nothing about how the columns go together.")
#: Colours and markers of the baselines in the plots.
_BASELINE_STYLE = {"independent": ("#8172b3", "D", "-.", 28), "uniform": ("#937860", "|", ":", 90)}

#: The columns every monitor file has (older files too); newer ones add ``_MONITOR_EXTRAS``.
_MONITOR_COLUMNS = ("update", "updates_allowed", "query_id", "query", "true_error", "sign_correct",
                    "phi_before", "phi_after", "drop", "guaranteed_drop", "flag")
#: The practical variant's monitor (synth.engines.monitor.PracticalMonitor) has these instead
#: (and ``predicted_drop``, called ``pythagorean_bound`` in older files).
_PRACTICAL_COLUMNS = ("update", "updates_allowed", "query_id", "query", "columns", "true_error", "phi_before",
                      "phi_after", "drop", "flag")
#: Read when present (synth.engines.monitor's docstring defines them): the Pythagorean bound and the budget.
_MONITOR_EXTRAS = ("threshold", "predicted_drop", "bound_gap", "epsilon_update", "rho_update", "epsilon_spent",
                   "delta_spent", "rho_spent")
_MOST_UPDATES = 50  # rows of the monitor's table in index.html
_BOUND_TOLERANCE = 1e-9  # a gap above -this keeps to the bound (synth.engines.monitor's tolerance)
_MOST_BARS = 40  # marginals shown in the bar chart (the worst ones)
_WORST_QUERIES = 20  # rows of the worst-queries table in index.html
_MOST_HISTOGRAMS = 60  # columns drawn in column_histograms.png
_MOST_CATEGORIES = 30  # bars per column there (the most common in the real data; the rest summed)


class ReportError(SynthError):
    """A report folder or a monitor file that cannot be used."""


# -- the monitor ----------------------------------------------------------------------------


@dataclass
class MonitorLog:
    """PMW's KL monitor CSV (``synth answer --monitor``): one entry per update.

    ``updates_allowed`` is the run's update bound L and ``planned_threshold`` its threshold T,
    both from the file's plan line (files without one: L from the rows, T from the guaranteed
    drop; ``None`` when there is no row either). ``variant`` is "theory" (the textbook PMW:
    ``guaranteed_drop`` per update) or "practical" (``true_error`` is the tested marginal's L1
    error). ``predicted_drop`` (KL(D_{t+1} || D_t), the Pythagorean bound), ``bound_gap``
    (drop - predicted_drop), ``kept_bound`` and the budget (``epsilon_spent`` etc., as
    ``synth.engines.monitor`` defines them) are ``None`` for older files without them (an older
    practical file's bound, ``pythagorean_bound``, is read as ``predicted_drop``).
    """

    update: np.ndarray
    updates_allowed: int | None
    query_id: np.ndarray
    query: list[str]
    true_error: np.ndarray
    phi_before: np.ndarray
    phi_after: np.ndarray
    guaranteed_drop: np.ndarray
    flag: list[str]
    planned_threshold: float | None = None
    variant: str = "theory"
    predicted_drop: np.ndarray | None = None
    bound_gap: np.ndarray | None = None
    kept_bound: np.ndarray | None = None
    epsilon_update: np.ndarray | None = None
    rho_update: np.ndarray | None = None
    epsilon_spent: np.ndarray | None = None
    delta_spent: np.ndarray | None = None
    rho_spent: np.ndarray | None = None
    spent_method: list[str] | None = None
    tested: list[str] | None = None  # practical: the tested columns (and test kind)

    def __len__(self) -> int:
        return int(self.update.size)

    @property
    def pythagorean_bound(self) -> np.ndarray | None:
        """``predicted_drop``'s older name."""
        return self.predicted_drop

    @property
    def zcdp(self) -> bool:
        """Whether the run charged rho (or its total composed under zCDP): then rho is shown too."""
        return bool((self.rho_update is not None and np.any(self.rho_update > 0))
                    or any("zcdp" in method for method in self.spent_method or ()))

    @property
    def threshold(self) -> float | None:
        """PMW's threshold T (the guaranteed drop is T^2/16); None when the file records neither."""
        if self.planned_threshold is not None:
            return self.planned_threshold
        if self.variant == "practical" or not len(self):
            return None
        return float(4 * math.sqrt(self.guaranteed_drop[0]))

    @property
    def allowed_text(self) -> str:
        """``L = 567`` (or that the file does not record L), for labels."""
        if self.updates_allowed is None:
            return "L not recorded in the monitor file"
        return f"L = {fmt(self.updates_allowed, COUNT)}"

    def summary(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "updates": len(self),
            "updates_allowed": self.updates_allowed,
            "threshold": self.threshold,
            "phi_start": _finite(self.phi_before[0]) if len(self) else None,
            "phi_end": _finite(self.phi_after[-1]) if len(self) else None,
            "flagged_updates": sum(1 for f in self.flag if f),
            "updates_within_bound": int(np.sum(self.kept_bound)) if self.kept_bound is not None else None,
            "epsilon_spent": (_finite(self.epsilon_spent[-1]) if self.epsilon_spent is not None and len(self)
                              else None),
            "rho_spent": (_finite(self.rho_spent[-1]) if self.rho_spent is not None and len(self) and self.zcdp
                          else None),
        }


def read_monitor(path: str | os.PathLike) -> MonitorLog:
    """Read a KL monitor CSV: a ``# NON-PRIVATE`` first line, the plan line
    (``# plan: updates_allowed=L threshold=T``; older files lack it), then the rows of ``MonitorRow``."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            lines = handle.read().splitlines(keepends=True)
        if not lines or not lines[0].startswith("# NON-PRIVATE"):
            raise ReportError(f"{path}: not a PMW monitor file (its first line should be '# NON-PRIVATE ...', "
                              "as synth answer --mechanism pmw --monitor writes it)")
        plan: dict[str, str] = {}
        body = 1
        while body < len(lines) and lines[body].startswith("#"):
            if lines[body].startswith(PLAN_PREFIX):
                plan = _plan_line(path, body + 1, lines[body][len(PLAN_PREFIX):])
            body += 1
        reader = csv.DictReader(lines[body:])
        fields = reader.fieldnames or []
        practical = plan.get("variant") == "practical" or "pythagorean_bound" in fields or "columns" in fields
        absent = [c for c in (_PRACTICAL_COLUMNS if practical else _MONITOR_COLUMNS)
                  if c not in (reader.fieldnames or [])]
        if absent:
            raise ReportError(f"{path}: not a PMW monitor file: no column {absent[0]!r}")
        rows = list(reader)
    except FileNotFoundError:
        raise ReportError(f"{path}: no such file") from None
    except UnicodeDecodeError:
        raise ReportError(f"{path}: not UTF-8 text") from None
    except csv.Error as exc:
        raise ReportError(f"{path}: malformed CSV: {exc}") from None

    def numbers(name: str, kind=float) -> np.ndarray:
        values = []
        for line, row in enumerate(rows, start=1):
            try:
                values.append(kind(row[name]))
            except (TypeError, ValueError):
                raise ReportError(f"{path}: row {line}, column {name!r}: {row[name]!r} is not a number") from None
        return np.array(values, dtype=np.int64 if kind is int else np.float64)

    allowed = numbers("updates_allowed", int)
    if "updates_allowed" in plan:
        updates_allowed = int(plan["updates_allowed"])
        if allowed.size and np.any(allowed != updates_allowed):
            raise ReportError(f"{path}: the plan line says updates_allowed={updates_allowed} but a row says "
                              f"{int(allowed[allowed != updates_allowed][0])}; is the file from two runs?")
    else:  # a file without a plan line: L is known only from its rows
        updates_allowed = int(allowed[0]) if allowed.size else None
    threshold = float(plan["threshold"]) if "threshold" in plan else None
    extra = {name: numbers(name) for name in _MONITOR_EXTRAS if name in fields}
    if "predicted_drop" not in extra and "pythagorean_bound" in fields:
        extra["predicted_drop"] = numbers("pythagorean_bound")  # an older practical file
    if "predicted_drop" in extra and "bound_gap" not in extra:
        extra["bound_gap"] = numbers("phi_before") - numbers("phi_after") - extra["predicted_drop"]
    if "bound_gap" in extra:
        extra["kept_bound"] = extra["bound_gap"] >= -_BOUND_TOLERANCE
    if "threshold" in extra and threshold is None and len(rows):
        threshold = float(extra["threshold"][0])
    extra.pop("threshold", None)
    if "spent_method" in fields:
        extra["spent_method"] = [r["spent_method"] or "" for r in rows]
    if practical:
        extra["tested"] = [(r["columns"] or "") + (f" ({r['test']})" if r.get("test") else "") for r in rows]
        return MonitorLog(numbers("update", int), updates_allowed, numbers("query_id", int),
                          [r["query"] for r in rows], numbers("true_error"), numbers("phi_before"),
                          numbers("phi_after"), np.zeros(len(rows)), [r["flag"] or "" for r in rows], threshold,
                          "practical", **extra)
    return MonitorLog(numbers("update", int), updates_allowed, numbers("query_id", int),
                      [r["query"] for r in rows], numbers("true_error"), numbers("phi_before"),
                      numbers("phi_after"), numbers("guaranteed_drop"), [r["flag"] or "" for r in rows], threshold,
                      **extra)


def _plan_line(path, line: int, text: str) -> dict[str, str]:
    """``updates_allowed=L threshold=T`` -> its entries, checked."""
    entries = {}
    for item in text.split():
        key, _, value = item.partition("=")
        entries[key] = value
    for key, kind in (("updates_allowed", int), ("threshold", float)):
        if key not in entries:
            continue
        try:
            number = kind(entries[key])
        except ValueError:
            number = None
        if number is None or not (math.isfinite(number) and number >= 0):
            raise ReportError(f"{path}: line {line}: {key}={entries[key]!r} is not a number >= 0 (the plan line "
                              "should read '# plan: updates_allowed=L threshold=T')")
    return entries


# -- the folder -----------------------------------------------------------------------------


def check_report_folder(folder: str | os.PathLike) -> None:
    """Refuse a target that exists and is neither an empty folder nor a previous report."""
    folder = Path(folder)
    if not folder.exists():
        if not folder.absolute().parent.is_dir():
            raise ReportError(f"{folder}: its parent folder does not exist")
        return
    if not folder.is_dir():
        raise ReportError(f"{folder}: exists and is not a folder; choose another -o")
    if not _replaceable(folder):
        raise ReportError(f"{folder}: exists and is not a synth evaluation report (only an empty folder or a "
                          "previous report is replaced); choose another -o or empty it")


def _replaceable(folder: Path) -> bool:
    entries = list(folder.iterdir())
    if not entries:
        return True
    if any(e.name not in REPORT_FILES or not e.is_file() or e.is_symlink() for e in entries):
        return False
    try:
        summary = json.loads((folder / SUMMARY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(summary, dict) and summary.get("format") == REPORT_FORMAT


def write_report(folder: str | os.PathLike, evaluation, *, monitor: MonitorLog | None = None,
                 context: dict[str, Any] | None = None, columns: dict[str, dict[str, Any]] | None = None,
                 histograms: list | None = None, utility: dict[str, Any] | None = None) -> list[str]:
    """Write the report folder (see the module docstring); return the names of its files.

    ``context`` adds entries to summary.json (e.g. the data and workload paths). ``columns``
    (``synth.report.columns.column_fidelity``) goes into summary.json as ``column_fidelity``
    and a table; ``histograms`` (``column_histograms``) into column_histograms.png; ``utility``
    (``synth.report.utility.ml_utility``) into summary.json as ``ml_utility`` and a table.
    Nothing appears at ``folder`` unless every file was written.
    """
    folder = Path(os.path.abspath(folder))
    check_report_folder(folder)
    try:
        temporary = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.", suffix=".tmp"))
    except OSError as exc:
        raise type(exc)(exc.errno, exc.strerror, str(folder)) from None
    try:
        os.chmod(temporary, 0o777 & ~_umask())  # mkdtemp makes 0700; give the usual mode
        extra = {"columns": columns, "histograms": histograms, "utility": utility}
        files = _write_files(temporary, evaluation, monitor, context or {}, extra)
        _install(temporary, folder)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return files


def _install(temporary: Path, folder: Path) -> None:
    """Rename the finished folder into place, replacing an empty folder or a previous report."""
    if not folder.exists():
        os.rename(temporary, folder)
        return
    check_report_folder(folder)  # still replaceable (nothing was added meanwhile)
    old = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.", suffix=".old"))
    os.rmdir(old)  # a free name beside the folder
    os.rename(folder, old)
    try:
        os.rename(temporary, folder)
    except BaseException:
        os.rename(old, folder)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def _write_files(folder: Path, evaluation, monitor: MonitorLog | None, context: dict[str, Any],
                 extra: dict[str, Any] | None = None) -> list[str]:
    extra = extra or {}
    with open(folder / ANSWERS, "w", encoding="utf-8", newline="") as handle:
        evaluation.write_answers_csv(handle)
    plots = {ERROR_PLOT: _plot_errors(evaluation, folder / ERROR_PLOT),
             SCATTER_PLOT: _plot_scatter(evaluation, folder / SCATTER_PLOT)}
    if evaluation.marginal_l1:
        plots[MARGINAL_PLOT] = _plot_marginals(evaluation, folder / MARGINAL_PLOT)
    if monitor is not None:
        plots[KL_PLOT] = _plot_potential(monitor, folder / KL_PLOT)
        plots[TIMELINE_PLOT] = _plot_timeline(monitor, folder / TIMELINE_PLOT)
    if extra.get("histograms"):
        plots[HISTOGRAM_PLOT] = _plot_histograms(extra["histograms"], folder / HISTOGRAM_PLOT)
    summary = {"format": REPORT_FORMAT, "format_version": REPORT_FORMAT_VERSION, **context, **evaluation.summary()}
    if extra.get("columns") is not None:
        summary["column_fidelity"] = {"privacy": COLUMNS_NOTE, **_json_numbers(extra["columns"])}
    if extra.get("utility") is not None:
        summary["ml_utility"] = {"privacy": UTILITY_NOTE, **_json_numbers(extra["utility"])}
    if monitor is not None:
        summary["monitor"] = {**summary.get("monitor", {}), **monitor.summary()}
    files = [ANSWERS, SUMMARY, *plots, INDEX]
    summary["files"] = files
    with open(folder / SUMMARY, "w", encoding="utf-8") as handle:
        json.dump(summary, handle, indent=2, ensure_ascii=False, allow_nan=False)
        handle.write("\n")
    with open(folder / INDEX, "w", encoding="utf-8") as handle:
        handle.write(_html(evaluation, summary, plots, monitor))
    return files


COLUMNS_NOTE = ("NON-PRIVATE: each column of the synthetic table against the real data's (it reads the private "
                "data); for the data owner only")
UTILITY_NOTE = ("NON-PRIVATE: classifiers trained on the synthetic and on the real data, tested on real rows (it "
                "reads the private data); for the data owner only")


def _json_numbers(obj):
    """``obj`` with NumPy numbers as Python ones and non-finite floats as None."""
    if isinstance(obj, dict):
        return {str(k): _json_numbers(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_numbers(v) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return _finite(obj)
    return obj


# -- plots ----------------------------------------------------------------------------------


def _figure(width: float = 6.4, height: float = 4.2):
    """A matplotlib figure on the Agg canvas (no display, no pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _save(figure, path: Path) -> str:
    figure.savefig(path, format="png", dpi=100)
    return path.name


def _plot_errors(evaluation, path: Path) -> str:
    """Histogram of the per-query absolute errors (fractions of n), mean and max marked."""
    errors = evaluation.absolute_error
    figure = _figure()
    axes = figure.add_subplot()
    bins = int(min(60, max(10, math.sqrt(errors.size))))
    axes.hist(errors, bins=bins, color="#4c72b0", edgecolor="white")
    axes.axvline(errors.mean(), color="#dd8452", linestyle="--", label=f"release: mean {fmt(errors.mean())}")
    axes.axvline(errors.max(), color="#c44e52", linestyle=":", label=f"release: max {fmt(errors.max())}")
    for name, baseline in _baselines(evaluation):
        colour, _, style, _ = _BASELINE_STYLE[name]
        mean = float(baseline.absolute_error.mean())
        axes.axvline(mean, color=colour, linestyle=style, label=f"{baseline.label}: mean {fmt(mean)} (NON-PRIVATE)")
    axes.set_xlabel("absolute error |true - released| (fraction of n)")
    axes.set_ylabel("queries (release)")
    axes.set_title(f"Error distribution over {fmt(errors.size, COUNT)} queries (n = {fmt(evaluation.n, COUNT)})")
    axes.legend(fontsize=8)
    return _save(figure, path)


def _plot_marginals(evaluation, path: Path) -> str:
    """Horizontal bars: the L1 error of each marginal, worst first (at most ``_MOST_BARS``)."""
    shown = sorted((m for m in evaluation.marginals if m.l1 is not None), key=lambda m: -m.l1)
    total = len(shown)
    shown = shown[:_MOST_BARS]
    figure = _figure(7.0, 1.4 + 0.26 * len(shown))
    axes = figure.add_subplot()
    labels = [" x ".join(m.columns) for m in shown]
    positions = np.arange(len(shown))
    axes.barh(positions, [m.l1 for m in shown], color="#55a868", label="release")
    for name, baseline in _baselines(evaluation):
        colour, marker, _, size = _BASELINE_STYLE[name]
        axes.scatter([m.baselines[name] for m in shown], positions, color=colour, marker=marker, s=size, zorder=3,
                     label=f"{baseline.label} (NON-PRIVATE)")
    axes.set_yticks(positions, labels, fontsize=8)
    axes.invert_yaxis()
    mean = float(np.mean(evaluation.marginal_l1))
    axes.axvline(mean, color="#dd8452", linestyle="--", label=f"release: mean {fmt(mean)}")
    axes.set_xlabel("L1 distance of the normalized marginal tables (0 to 2)")
    title = "Error per marginal"
    if total > len(shown):
        title += f" (the {len(shown)} worst of {total})"
    axes.set_title(title)
    axes.legend(loc="lower right", fontsize=8)
    return _save(figure, path)


def _plot_scatter(evaluation, path: Path) -> str:
    """Released against true answers, as fractions of n, with the line y = x."""
    x, y = evaluation.true_fraction, evaluation.released_fraction
    figure = _figure(5.6, 5.2)
    axes = figure.add_subplot()
    axes.scatter(x, y, s=10 if x.size < 5000 else 3, alpha=0.6, color="#4c72b0", linewidths=0)
    low = float(min(x.min(), y.min(), 0.0))
    high = float(max(x.max(), y.max()))
    high = high if high > low else low + 1.0
    axes.plot([low, high], [low, high], color="#c44e52", linewidth=1, label="y = x (no error)")
    axes.set_xlabel("true answer (fraction of n)")
    axes.set_ylabel("released answer (fraction of the released n)")
    axes.set_title(f"True vs released ({evaluation.kind})")
    axes.legend(loc="upper left")
    return _save(figure, path)


def _plot_histograms(histograms: list, path: Path) -> str:
    """One panel per column: the real and synthetic shares of each value (categories with the
    missing value; numbers by the schema's bins), side by side. NON-PRIVATE."""
    shown = histograms[:_MOST_HISTOGRAMS]
    across = min(3, len(shown))
    down = math.ceil(len(shown) / across)
    figure = _figure(5.0 * across, 3.4 * down + 0.6)
    for k, h in enumerate(shown):
        axes = figure.add_subplot(down, across, k + 1)
        labels, real, synthetic = list(h.labels), np.asarray(h.real), np.asarray(h.synthetic)
        if h.kind != "numeric" and len(labels) > _MOST_CATEGORIES:  # the most common, the rest summed
            keep = np.sort(np.argsort(-real, kind="stable")[:_MOST_CATEGORIES - 1])
            rest = np.setdiff1d(np.arange(len(labels)), keep)
            labels = [labels[i] for i in keep] + [f"{rest.size} others"]
            real = np.append(real[keep], real[rest].sum())
            synthetic = np.append(synthetic[keep], synthetic[rest].sum())
        positions = np.arange(len(labels))
        axes.bar(positions - 0.2, real, width=0.4, color="#c44e52", label="real (NON-PRIVATE)")
        axes.bar(positions + 0.2, synthetic, width=0.4, color="#4c72b0", label="synthetic")
        axes.set_xticks(positions, labels, rotation=60 if len(labels) > 4 else 0, ha="right" if len(labels) > 4
                        else "center", fontsize=7)
        axes.set_title(f"{h.name} ({h.kind})", fontsize=9)
        axes.set_ylabel("share of rows", fontsize=8)
        if k == 0:
            axes.legend(fontsize=7)
    title = "Per column: real (NON-PRIVATE) against synthetic"
    if len(histograms) > len(shown):
        title += f" (the first {len(shown)} of {len(histograms)} columns)"
    figure.suptitle(title)
    return _save(figure, path)


def _plot_potential(monitor: MonitorLog, path: Path) -> str:
    """The KL potential after each update, against what the analysis promises: the Pythagorean
    bound (Phi before the update less KL(D_{t+1} || D_t), reached by an exact projection onto a
    set holding the truth; hollow where the update fell short of it) and, for the theory
    variant, a drop of T^2/16 per update. Flagged updates in red. On the right axis, the
    epsilon spent by each update (files that record it)."""
    figure = _figure(6.8, 4.2)
    axes = figure.add_subplot()
    if len(monitor):
        steps = np.concatenate([[0], monitor.update])
        phi = np.concatenate([[_finite_or_nan(monitor.phi_before[0])], _finite_or_nan(monitor.phi_after)])
        axes.plot(steps, phi, marker="o", markersize=3, color="#4c72b0", label="KL(x/n || D_t)")
        start = phi[0]
        if monitor.predicted_drop is not None:
            bound = _finite_or_nan(monitor.phi_before) - monitor.predicted_drop
            kept = monitor.kept_bound if monitor.kept_bound is not None else np.ones(len(monitor), dtype=bool)
            axes.scatter(monitor.update[kept], bound[kept], marker="_", s=90, color="#8c8c8c",
                         label="Phi before - KL(D_t+1 || D_t) (Pythagorean bound)")
            if not kept.all():
                axes.scatter(monitor.update[~kept], bound[~kept], marker="v", s=24, facecolors="none",
                             edgecolors="#dd8452", label=f"bound not kept: overshot ({int((~kept).sum())})")
        if monitor.variant != "practical" and np.isfinite(start):
            bound = np.maximum(start - steps * monitor.guaranteed_drop[0], 0.0)
            axes.plot(steps, bound, linestyle="--", color="#8c8c8c", label="start - t T^2/16 (guaranteed)")
        flagged = np.array([bool(f) for f in monitor.flag])
        if flagged.any():
            axes.scatter(monitor.update[flagged], _finite_or_nan(monitor.phi_after[flagged]), color="#c44e52",
                         zorder=3, label=f"flagged ({int(flagged.sum())})")
        handles, labels = axes.get_legend_handles_labels()
        top = axes
        if monitor.epsilon_spent is not None and np.isfinite(monitor.epsilon_spent).any():
            top = axes.twinx()  # drawn over the potential: the legend goes on it
            line, = top.step(monitor.update, monitor.epsilon_spent, where="post", color="#55a868", linewidth=1,
                             alpha=0.8)
            top.set_ylabel("epsilon spent by the update", color="#55a868")
            top.set_ylim(bottom=0)
            handles, labels = handles + [line], labels + ["epsilon spent (right axis)"]
        top.legend(handles, labels, fontsize="small", framealpha=0.9)
    else:
        axes.text(0.5, 0.5, "PMW made no update", ha="center", va="center", transform=axes.transAxes)
    axes.set_xlabel(f"update t ({_allowed_label(monitor)})")
    axes.set_ylabel("potential (nats)")
    axes.set_title("KL potential per update (NON-PRIVATE monitor)")
    return _save(figure, path)


def _plot_timeline(monitor: MonitorLog, path: Path) -> str:
    """Per update: the query it came from, and that query's true error against T/2."""
    figure = _figure(6.8, 5.4)
    top, bottom = figure.subplots(2, 1, sharex=True)
    if len(monitor):
        flagged = np.array([bool(f) for f in monitor.flag])
        colours = np.where(flagged, "#c44e52", "#4c72b0")
        top.scatter(monitor.update, monitor.query_id, c=colours, s=14)
        bottom.vlines(monitor.update, 0, monitor.true_error, color=colours)
        bottom.scatter(monitor.update, monitor.true_error, c=colours, s=10)
        if monitor.variant == "practical":
            if monitor.planned_threshold is not None:
                bottom.axhline(monitor.planned_threshold, linestyle="--", color="#8c8c8c", label="T")
                bottom.legend()
        else:
            bottom.axhline(monitor.threshold / 2, linestyle="--", color="#8c8c8c", label="T/2")
            bottom.legend()
    else:
        top.text(0.5, 0.5, "PMW made no update", ha="center", va="center", transform=top.transAxes)
    top.set_ylabel("query id")
    top.set_title("Round timeline: the updates (red: flagged by the monitor)")
    bottom.set_ylabel("true error at the update\n(fraction of n)")
    bottom.set_xlabel(f"update t ({_allowed_label(monitor)})")
    return _save(figure, path)


def _baselines(evaluation) -> list[tuple[str, Any]]:
    """The evaluation's baselines, in ``BASELINES`` order (none for an evaluation without them)."""
    found = getattr(evaluation, "baselines", None) or {}
    return [(name, found[name]) for name in BASELINES if name in found]


def _allowed_label(monitor: MonitorLog) -> str:
    """The plots' note on L: ``of L = 567 allowed`` (the run's plan, from the monitor file)."""
    if monitor.updates_allowed is None:
        return monitor.allowed_text
    return f"of {monitor.allowed_text} allowed"


def _finite_or_nan(values):
    values = np.asarray(values, dtype=np.float64)
    return np.where(np.isfinite(values), values, np.nan)


def _finite(value) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


# -- the page -------------------------------------------------------------------------------

_STYLE = """
body { font-family: sans-serif; margin: 2em auto; max-width: 60em; color: #222; }
.private { background: #fde8e8; border: 2px solid #c44e52; padding: 0.8em 1em; font-weight: bold; }
table { border-collapse: collapse; margin: 1em 0; }
td, th { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th.baseline, td.baseline { background: #f4f1fa; }
figure { margin: 1.5em 0; } img { max-width: 100%; }
"""

#: The rows of the release-against-baselines table: (label, summary key; the same key in each baseline's entry).
_MEASURES = (
    ("mean L1 per marginal (0 to 2)", "mean_marginal_l1"),
    ("max L1 per marginal", "max_marginal_l1"),
    ("max absolute error (fraction of n)", "max_absolute_error"),
    ("mean absolute error (fraction of n)", "mean_absolute_error"),
    ("median absolute error (fraction of n)", "median_absolute_error"),
    ("mean relative error (queries with a true count > 0)", "mean_relative_error"),
)
_ROWS_OF = {"max_absolute_error": "max_absolute_error_rows", "mean_absolute_error": "mean_absolute_error_rows"}


def _html(evaluation, summary: dict[str, Any], plots: dict[str, str], monitor: MonitorLog | None) -> str:
    e = html.escape
    source = summary["source"]
    rows = [
        ("data", summary.get("data")),
        ("workload", summary.get("workload")),
        ("columns", ", ".join(summary["columns"])),
        ("true rows n", fmt(summary["n"], COUNT)),
        ("queries", fmt(summary["queries"], COUNT)),
        ("source", f"{source['kind']}" + (f" ({source['path']})" if source.get("path") else "")),
    ]
    if source["kind"] == "synthetic":
        rows.append(("synthetic rows", fmt(source.get("rows"), COUNT)))
    elif source["kind"] == "answers" and source.get("privacy"):
        rows.append(("answers' privacy", source["privacy"]))
    rows += _record_rows(source)
    rows.append(("marginals evaluated", (f"{fmt(summary['marginals_evaluated'], COUNT)} of "
                                        f"{fmt(summary['marginals_total'], COUNT)}")))
    if summary.get("worst_query") is not None:
        worst = summary["worst_query"]
        rows.append(("worst query", f"{worst}: {evaluation.workload.describe(worst)}"))
    if monitor is not None:
        m = summary["monitor"]
        within = ("" if m.get("updates_within_bound") is None else
                  f"; {fmt(m['updates_within_bound'], COUNT)} kept to the Pythagorean bound")
        spent = ("" if m.get("epsilon_spent") is None
                 else f"; epsilon {fmt(m['epsilon_spent'], PRIVACY)} spent by the last")
        if spent and m.get("rho_spent") is not None:
            spent += f" (rho {fmt(m['rho_spent'], PRIVACY)})"
        rows.append(("PMW monitor", (f"{fmt(m['updates'], COUNT)} updates ({_allowed_label(monitor)}); potential "
                                    f"{fmt(m['phi_start'])} -> {fmt(m['phi_end'])}; "
                                    f"{fmt(m['flagged_updates'], COUNT)} flagged{within}{spent}")))
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>synth evaluation report (NON-PRIVATE)</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>synth evaluation report (NON-PRIVATE)</h1>",
        f'<p class="private">{e(HEADER_TEXT)}</p>',
        "<h2>Summary</h2><table>",
        *(f"<tr><th>{e(k)}</th><td>{e(str(v))}</td></tr>" for k, v in rows if v is not None),
        "</table>",
        *_comparison(summary),
        ("<p>Errors compare fractions: each true count over n, each released answer over the row count the "
        "release is scaled to. The marginal L1 error is the L1 distance between the normalized true and "
        "released tables of a column subset (0 to 2).</p>"),
        f'<p>Files: <a href="{ANSWERS}">{ANSWERS}</a> (every query), <a href="{SUMMARY}">{SUMMARY}</a>.</p>',
    ]
    captions = {
        ERROR_PLOT: "Distribution of the absolute errors (the baselines' means marked, NON-PRIVATE)",
        MARGINAL_PLOT: "L1 error per marginal (the baselines' marked, NON-PRIVATE)",
        SCATTER_PLOT: "True vs released answers",
        KL_PLOT: "PMW: KL potential per update",
        TIMELINE_PLOT: "PMW: round timeline",
        HISTOGRAM_PLOT: "Per column: real against synthetic shares (NON-PRIVATE: reads the real data)",
    }
    parts.append("<h2>Plots</h2>")
    if MARGINAL_PLOT not in plots:
        parts.append("<p>No marginal is determined by the released answers (they do not cover every cell of "
                     "any marginal), so there is no per-marginal error.</p>")
    for name in plots:
        parts.append(f'<figure><img src="{e(name)}" alt="{e(captions[name])}">'
                     f"<figcaption>{e(captions[name])}</figcaption></figure>")
    parts += _marginal_table(summary)
    parts += _column_table(summary)
    parts += _utility_table(summary)
    parts += _constraint_table(summary)
    worst = np.argsort(-evaluation.absolute_error, kind="stable")[:_WORST_QUERIES]
    parts.append(f"<h2>The {len(worst)} worst queries</h2><table><tr><th>id</th><th>query</th><th>true</th>"
                 "<th>released</th><th>absolute error (of n)</th></tr>")
    for i in worst.tolist():
        parts.append(f"<tr><td class='num'>{i}</td><td>{e(evaluation.workload.describe(i))}</td>"
                     f"<td class='num'>{fmt(evaluation.true[i], COUNT)}</td>"
                     f"<td class='num'>{fmt(evaluation.released[i], COUNT)}</td>"
                     f"<td class='num'>{fmt(evaluation.absolute_error[i])}</td></tr>")
    parts.append("</table>")
    if monitor is not None:
        parts += _monitor_table(monitor)
        flagged = [(u, f) for u, f in zip(monitor.update.tolist(), monitor.flag) if f]
        if flagged:
            parts.append("<h2>Monitor flags</h2><ul>")
            parts += [f"<li>update {u}: {e(f)}</li>" for u, f in flagged[:50]]
            parts.append("</ul>")
    parts.append(f'<p class="private">{e(HEADER_TEXT)}</p></body></html>\n')
    return "\n".join(parts)


MONITOR_TEXT = ("How to read it: each row is one update; Phi = KL(x/n || D) is how far the model is from the true "
                "data (0 when exact), a step that projects onto a set holding the truth lowers it by at least the "
                "predicted drop KL(D_t+1 || D_t) (the Pythagorean bound, from the public models alone), so a negative "
                "gap (actual less predicted drop) says the update overshot the truth in its own direction (the "
                "noise's part), while the true error of what was tested (against T, fractions of n) and the budget "
                "columns (the update's own charge, the accountant's total by then) show which updates the online "
                "error and its cost came from. Computed from the true data: NON-PRIVATE, for the data owner only.")


def _monitor_table(monitor: MonitorLog) -> list[str]:
    """One row per update (the first ``_MOST_UPDATES``): what was tested and its true error,
    Phi before and after, the Pythagorean bound and the gap to it, and the budget."""
    e = html.escape
    if not len(monitor):
        return []
    has_bound = monitor.predicted_drop is not None and monitor.bound_gap is not None
    has_budget = monitor.epsilon_update is not None and monitor.epsilon_spent is not None
    zcdp = has_budget and monitor.zcdp and monitor.rho_update is not None and monitor.rho_spent is not None
    heads = ["t", "query", *(["tested"] if monitor.tested is not None else []), "true error (of n)", "Phi before",
             "Phi after", "drop"]
    if has_bound:
        heads += ["predicted drop KL(D_t+1 || D_t)", "gap (drop - predicted)", "kept to the bound"]
    if has_budget:
        heads += ["epsilon, this update", *(["rho, this update"] if zcdp else []), "epsilon spent",
                  *(["rho spent"] if zcdp else [])]
    heads.append("flag")
    threshold = monitor.threshold
    shown = min(len(monitor), _MOST_UPDATES)
    title = "PMW monitor: where the online error came from (NON-PRIVATE)"
    note = (f"T = {fmt(threshold)} of n. " if threshold is not None else "") + (
        f"The first {shown} of {fmt(len(monitor), COUNT)} updates; the monitor CSV has them all."
        if shown < len(monitor) else "")
    parts = [f"<h2>{e(title)}</h2>", f"<p>{e(MONITOR_TEXT)}</p>"]
    if note.strip():
        parts.append(f"<p>{e(note.strip())}</p>")
    parts.append("<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in heads) + "</tr>")
    for i in range(shown):
        cells = [(str(int(monitor.update[i])), True), (f"{int(monitor.query_id[i])}: {monitor.query[i]}", False)]
        if monitor.tested is not None:
            cells.append((monitor.tested[i], False))
        cells += [(fmt(monitor.true_error[i]), True), (fmt(monitor.phi_before[i]), True),
                  (fmt(monitor.phi_after[i]), True), (fmt(monitor.phi_before[i] - monitor.phi_after[i]), True)]
        if has_bound:
            cells += [(fmt(monitor.predicted_drop[i]), True), (fmt(monitor.bound_gap[i]), True),
                      ("yes" if monitor.kept_bound[i] else "no: overshot", False)]
        if has_budget:
            cells.append((fmt(monitor.epsilon_update[i], PRIVACY), True))
            if zcdp:
                cells.append((fmt(monitor.rho_update[i], PRIVACY), True))
            cells.append((fmt(monitor.epsilon_spent[i], PRIVACY), True))
            if zcdp:
                cells.append((fmt(monitor.rho_spent[i], PRIVACY), True))
        cells.append((monitor.flag[i], False))
        parts.append("<tr>" + "".join(f"<td class='num'>{e(text)}</td>" if number else f"<td>{e(text)}</td>"
                                      for text, number in cells) + "</tr>")
    parts.append("</table>")
    return parts


def _baseline_heads(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """(key, column heading) of each baseline the summary holds, in ``BASELINES`` order."""
    found = summary.get("baselines") or {}
    return [(name, f"{found[name]['label']} (NON-PRIVATE)") for name in BASELINES if name in found]


def _comparison(summary: dict[str, Any]) -> list[str]:
    """The release's measures beside the baselines', one row per measure, and what the baselines are."""
    e = html.escape
    heads = _baseline_heads(summary)
    parts = ["<h2>The release against two baselines (NON-PRIVATE)</h2>", f"<p>{e(BASELINE_TEXT)}</p>",
             "<table><tr><th>measure</th><th>release</th>"
             + "".join(f"<th class='baseline'>{e(head)}</th>" for _, head in heads) + "</tr>"]
    for label, key in _MEASURES:
        cells = [_measure_text(summary, key)]
        cells += [_measure_text(summary["baselines"][name], key) for name, _ in heads]
        parts.append(f"<tr><th>{e(label)}</th><td class='num'>{e(cells[0])}</td>"
                     + "".join(f"<td class='num baseline'>{e(c)}</td>" for c in cells[1:]) + "</tr>")
    parts.append("</table>")
    if summary["marginals_evaluated"] < summary["marginals_total"]:
        parts.append(f"<p>The L1 measures are over the {fmt(summary['marginals_evaluated'], COUNT)} marginals the "
                     "release determines, for the baselines too.</p>")
    return parts


def _measure_text(measures: dict[str, Any], key: str) -> str:
    text = fmt(measures.get(key))
    rows = measures.get(_ROWS_OF.get(key, ""))
    return text if rows is None else f"{text} (~{fmt(rows, COUNT)} rows)"


def _marginal_table(summary: dict[str, Any]) -> list[str]:
    """One row per marginal, worst (for the release) first: its L1 error and the baselines'."""
    e = html.escape
    marginal_rows = summary["marginals"]
    if not marginal_rows:
        return []
    heads = _baseline_heads(summary)
    parts = ["<h2>Marginals</h2><table><tr><th>columns</th><th>cells</th><th>queries</th><th>L1, release</th>"
             + "".join(f"<th class='baseline'>L1, {e(head)}</th>" for _, head in heads) + "</tr>"]
    for m in sorted(marginal_rows, key=lambda m: -(m["l1"] if m["l1"] is not None else -1)):
        baseline = m.get("baseline_l1") or {}
        parts.append(f"<tr><td>{e(' x '.join(m['columns']))}</td><td class='num'>{fmt(m['cells'], COUNT)}</td>"
                     f"<td class='num'>{fmt(m['queries'], COUNT)}</td><td class='num'>{fmt(m['l1'])}</td>"
                     + "".join(f"<td class='num baseline'>{fmt(baseline.get(name))}</td>" for name, _ in heads)
                     + "</tr>")
    parts.append("</table>")
    return parts


COLUMNS_TEXT = ("Each column of the synthetic table against the real data's: for categorical and coded columns the "
                "total-variation distance between the two distributions (the missing value counted as a value; 0 to "
                "1); for numeric columns the Wasserstein-1 distance between the real and synthetic values divided by "
                "the schema's range (last edge minus first), and the Kolmogorov-Smirnov statistic; the share of rows "
                "missing in each. Computed from the real data: NON-PRIVATE, for the data owner only.")


def _column_table(summary: dict[str, Any]) -> list[str]:
    """One row per column: TV or W1/range and KS, and the missing shares (NON-PRIVATE)."""
    e = html.escape
    found = summary.get("column_fidelity")
    if not found:
        return []
    parts = ["<h2>Columns: real against synthetic (NON-PRIVATE)</h2>", f"<p>{e(COLUMNS_TEXT)}</p>",
             "<table><tr><th>column</th><th>kind</th><th>TV</th><th>W1 / range</th><th>KS</th>"
             "<th>missing, real (NON-PRIVATE)</th><th>missing, synthetic</th></tr>"]
    for name, entry in found.items():
        if not isinstance(entry, dict):
            continue
        cells = [fmt(entry["tv"]) if "tv" in entry else "", fmt(entry.get("w1_over_range"))
                 if "w1_over_range" in entry else "", fmt(entry.get("ks")) if "ks" in entry else "",
                 fmt(entry["missing_real"]), fmt(entry["missing_synthetic"])]
        parts.append(f"<tr><td>{e(name)}</td><td>{e(entry['kind'])}</td>"
                     + "".join(f"<td class='num'>{c}</td>" for c in cells) + "</tr>")
    parts.append("</table>")
    return parts


def _constraint_table(summary: dict[str, Any]) -> list[str]:
    """One row per declared constraint: the shares of released and of real rows (NON-PRIVATE) that break it."""
    e = html.escape
    found = summary.get("constraints")
    if not found:
        return []
    parts = ["<h2>Declared constraints</h2>",
             "<p>The share of rows that break each constraint of the schema: of the release (a model's mass on the "
             "rows it rules out; a synthetic table's rows), and of the real data for reference (NON-PRIVATE).</p>",
             "<table><tr><th>constraint</th><th>released rows breaking it</th>"
             "<th class='baseline'>real rows breaking it (NON-PRIVATE)</th></tr>"]
    for check in found["checks"]:
        parts.append(f"<tr><td>{e(check['constraint'])}</td><td class='num'>{fmt(check['released_violating_share'])}"
                     f"</td><td class='num baseline'>{fmt(check['real_violating_share'])}</td></tr>")
    parts.append("</table>")
    return parts


def _utility_table(summary: dict[str, Any]) -> list[str]:
    """Accuracy and ROC AUC of each classifier trained on synthetic and on real (NON-PRIVATE)."""
    e = html.escape
    found = summary.get("ml_utility")
    if not found:
        return []
    rows = found["rows"]
    parts = [f"<h2>Machine-learning utility: predicting {e(found['target'])} (NON-PRIVATE)</h2>",
             f"<p>Each classifier is trained on the synthetic table ({fmt(rows['train_synthetic'], COUNT)} rows) and, "
             f"as the ceiling, on real rows ({fmt(rows['train_real'], COUNT)}), then tested on real rows "
             f"({fmt(rows['test_real'], COUNT)}): {e(found['test'])}. The target ({e(found['target_kind'])}) has "
             f"{fmt(found['classes'], COUNT)} classes in the test rows; ROC AUC is the second class's for two "
             "classes, the macro mean of one-vs-rest AUCs for more. Computed from the real data: NON-PRIVATE, for "
             "the data owner only.</p>",
             "<table><tr><th>classifier</th><th>accuracy, trained on synthetic</th>"
             "<th class='baseline'>accuracy, trained on real (NON-PRIVATE)</th><th>ROC AUC, trained on synthetic</th>"
             "<th class='baseline'>ROC AUC, trained on real (NON-PRIVATE)</th></tr>"]
    for entry in found["models"].values():
        syn, real = entry["train_synthetic"], entry["train_real"]
        parts.append(f"<tr><th>{e(entry['label'])}</th><td class='num'>{fmt(syn['accuracy'])}</td>"
                     f"<td class='num baseline'>{fmt(real['accuracy'])}</td><td class='num'>{fmt(syn['roc_auc'])}</td>"
                     f"<td class='num baseline'>{fmt(real['roc_auc'])}</td></tr>")
    parts.append("</table>")
    return parts


_NOT_RECORDED = "not recorded"


def _record_rows(source: dict[str, Any]) -> list[tuple[str, str]]:
    """The release's privacy record: where it comes from, mechanism, epsilon and delta spent,
    n's status and seeding ("not recorded" where the record lacks them)."""
    rows = []
    if source.get("privacy_record") and source["privacy_record"] != "the model's own":
        rows.append(("privacy record", source["privacy_record"]))
    rows.append(("mechanism", source.get("mechanism") or _NOT_RECORDED))

    def known(name: str) -> str:
        return _NOT_RECORDED if source.get(name) is None else fmt(source[name], PRIVACY)

    if source.get("epsilon") is None and source.get("delta") is None:
        rows.append(("privacy spent", _NOT_RECORDED))
    else:
        rows.append(("privacy spent", f"epsilon = {known('epsilon')}, delta = {known('delta')}"))
    count = source.get("rows") if source["kind"] == "model" else source.get("model_rows")
    status = {"public": "public (given, not read from the data)",
              "noisy count": "a noisy count bought from the budget"}.get(source.get("n_status"))
    if status is None:
        rows.append(("release's n", _NOT_RECORDED))
    else:
        rows.append(("release's n", status if count is None else f"{fmt(count, COUNT)}: {status}"))
    seeded = source.get("seeded")
    rows.append(("seeded run", _NOT_RECORDED if seeded is None else
                 "yes: a seeded run is for testing, not for release" if seeded else "no"))
    return rows
