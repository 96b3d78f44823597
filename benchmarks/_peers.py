"""What other tools scored on the benchmarks' tables: figures quoted from the project brief and the
issues (not measured in these runs), the targets set against them, and the report pieces that put
synth's measured figures beside them.
"""

from __future__ import annotations

from _report import met, seconds_text, table

#: eps = 1, adult's 7 columns, all 35 three-way marginals (the project brief): (who, mean L1, time).
SEVEN_COLUMNS = (("smartnoise-synth MWEM", 0.083, "about 800 s"), ("AIM", 0.037, "200-300 s"),
                 ("independent 1-way marginals", 0.44, "-"))
SMARTNOISE_SECONDS = 800.0
#: The issue's targets against smartnoise-synth's MWEM there: at most this share of its error, at
#: least this many times faster.
ERROR_SHARE_TARGET, SPEEDUP_TARGET = 0.5, 20.0
#: AIM's synthetic mean L1 on all 14 adult columns' 91 pairs: 0.087 under pure epsilon (the
#: factored issue's target); 0.075 under zCDP, delta = 1e-9, where AIM runs (the zCDP issue's).
AIM_PAIRS_L1 = {0.0: 0.087, 1e-9: 0.075}
AIM_PAIRS = ("AIM (private-pgm, graphical models, model size capped) on the 91 pairs: mean L1 0.087 in about "
             "10 minutes (the issues' figure, zCDP with delta > 0). delta = 0: synth's MWEM in pure "
             "epsilon-DP (discrete Laplace); delta = 1e-9: rho-zCDP (discrete Gaussian), as AIM accounts.")
#: AIM on adult and on bench_mwem_zcdp's small tables (those measured once beside it: dpmm needs
#: numpy 1.26, so it ran in its own environment; the calls are quoted so the figure can be re-measured).
AIM_ZCDP = (
    "For comparison (the issues' figures, measured with dpmm 0.1.9, zCDP): AIM on the 7 columns at "
    "eps = 1 0.036-0.040 (n public) and 0.038 (n noisy) in 200-550 s; on the 14 columns' 91 pairs 0.087 "
    "in about 10 minutes; on tables of about 1,300 rows 0.29. "
    "On this benchmark's own five 1,300-row tables (seeds 0-4, the rows written out and fed to dpmm "
    "0.1.9's AIMPipeline(epsilon=1, delta=1e-9, disable_processing=True, gen_kwargs={'degree': 3}), i.e. "
    "AIM with the same 35 three-way marginals as its workload and the columns' domains as given, 1,300 "
    "rows generated) AIM's mean L1 was 0.4655 median [0.4257, 0.4833] in 102-121 s a table (0.4598 median"
    ' with its default two-way workload); the 0.29 quoted by the issue was not reproduced with that '
    "package's defaults."
)


def seven_columns(synth: str, error: float, seconds: float, uniform: float, eps: float) -> list[str]:
    """synth's figure on the 7 columns (``synth`` names the call) beside the quoted ones and the
    uniform distribution's, then the issue's targets against smartnoise-synth's MWEM."""
    base = SEVEN_COLUMNS[0][1]
    rows = [[synth, f"{error:.3f}", seconds_text(seconds), "measured here"],
            *([who, f"{e:.3f}", t, "quoted from the project brief, **not measured here**"]
              for who, e, t in SEVEN_COLUMNS),
            ["uniform distribution", f"{uniform:.3f}", "-", "measured here"]]
    return [table("@method|error|time|@source", rows),
            f"Issue targets (7 columns, eps = {eps:g}): error <= {ERROR_SHARE_TARGET:g}x smartnoise-synth "
            f"MWEM's: {error / base:.2f}x, {met(error <= ERROR_SHARE_TARGET * base)}; >= {SPEEDUP_TARGET:g}x "
            f"faster than its quoted {SMARTNOISE_SECONDS:.0f} s (another machine, indicative only): "
            f"{SMARTNOISE_SECONDS / seconds:.0f}x, {met(SMARTNOISE_SECONDS / seconds >= SPEEDUP_TARGET)}."]
