"""Make the bundled demo table: a SYNTHETIC household survey (no real people).

    python datasets/make_demo.py                      # rewrites synth/datasets/demo.csv, demo-schema.json
    python datasets/make_demo.py --rows 5000 --seed 3 -o /tmp/demo

Every row is drawn by the seeded generative model below; nothing comes from a real survey,
and no row describes a real person. The defaults (30,000 rows, seed 20260601) reproduce the
committed ``demo.csv`` byte for byte. The schema (labels and bin edges) is fixed in this file:
it is public knowledge and never learnt from the drawn rows, so it is the same for every
``--rows`` and ``--seed``. It has no ``rows`` entry: the row count is left to the mechanism
(public by choice, or a noisy count bought with budget).

Columns (universe 6 * 2 * 4 * 5 * 4 * 7 * 2 * 3 = 40,320 cells):

=========== ======= =====================================================================
column      kind    values
=========== ======= =====================================================================
age         numeric integer years 18..90; bins [18,25) [25,35) ... [55,65) [65,90]
sex         labels  female, male
region      labels  northeast, midwest, south, west
education   labels  primary, secondary, vocational, bachelor, postgraduate (highest done)
employment  labels  employed, unemployed, retired, student
income      numeric personal yearly income, whole hundreds, top-coded at 250000;
                    bins at 0, 10k, 20k, 35k, 50k, 75k, 100k, 250k
smoker      labels  no, yes
health      labels  good, fair, poor (self-rated)
=========== ======= =====================================================================

The generative model, drawn in this order (``logistic`` is standard-logistic noise):

1. age: an age group with weights 18-24: .12, 25-34: .18, 35-44: .17, 45-54: .17,
   55-64: .16, 65-74: .12, 75-90: .08, then a whole year uniform inside the group.
2. sex: female with probability .50 under 65, .53 at 65-74, .58 at 75+ (women live longer).
3. region: northeast .17, midwest .21, south .38, west .24, *independent of everything drawn
   before* (region is independent of age and of sex by design).
4. education: an ordered-logit latent ``-0.025 * (age - 45) + region effect (ne +.3, mw 0,
   s -.2, w +.1) + sex-by-age effect (women +.3 under 45, -.4 at 65+) + logistic``, cut at
   -2.6, -0.4, 0.6, 2.0 into the five levels; then capped by age: at most secondary under 21,
   vocational at 21, bachelor under 24 (nobody finishes a degree at 18).
5. employment: retired with probability ``1 / (1 + exp(-(age - 64 - e) / 2))`` where ``e`` is
   1 for a bachelor or postgraduate degree; otherwise student with probability by age
   (.65 at 18-19, .55 at 20-21, .35 at 22-24, .10 at 25-29, .03 at 30-34, .01 above) times
   (.4 for primary education, 1.3 for a bachelor's degree); otherwise unemployed at a rate by
   education (.14, .08, .06, .04, .03) times 1.5 under 25 times a region factor
   (ne 1.0, mw .9, s 1.05, w 1.1); otherwise employed.
6. income, log-normal by employment:
   employed: median by education (24k, 34k, 42k, 62k, 85k) * experience
   ``exp(-0.0004 (age - 50)^2)`` * .82 for women * region (ne 1.12, mw .95, s .93, w 1.08)
   * .5 when part-time (22% of women, 8% of men), sigma .45;
   unemployed: 20% none, else median 9k, sigma .6;
   student: 35% none, else median 7k, sigma .8;
   retired: median ``16k + .3 * (employed median for the education)`` * region, sigma .45.
   Rounded to whole hundreds and top-coded at 250,000.
7. smoker: yes with probability ``logistic(-1.8 + age (18-24 +.2, 25-44 +.4, 45-64 +.2,
   65-74 -.3, 75+ -1.0) + education (+.9, +.5, +.3, -.4, -.9) + .3 for men + region (ne -.1,
   mw +.2, s +.3, w -.4) + .5 when unemployed)``.
8. health: an ordered-logit latent ``2.2 - 0.04 * (age - 18) + 0.25 * (education code - 2)
   + 0.45 * ln((income + 3000) / 30000) - 0.4 when unemployed - smoker * (0.3 + 0.02 * (age
   - 18)) + logistic``, poor below -1.0, fair below 0.5, else good. Smoking harms more with
   age: a three-way effect (age, smoker, health) that no pair of columns shows alone.

So the strong pairs are age-employment, age-education, education-income, employment-income,
age-income, sex-income, education-smoker, age-health, smoker-health, income-health; region
shifts education, unemployment, income and smoking a little, and is independent of age and
sex. Three-way effects: education depends on sex differently by age (women ahead under 45,
behind at 65+), income depends on education for the employed and retired but not for the
unemployed or students, and smoking harms health more with age.

Uses NumPy's seeded ``default_rng`` (PCG64) and pandas only; the CSV is written with ``\\n``
line ends and every number as an integer, so the output is the same on every run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

DEFAULT_ROWS = 30_000
DEFAULT_SEED = 20260601
HERE = Path(__file__).resolve().parent
#: Where the bundled copy lives: package data, so every install of synth has it.
BUNDLED = HERE.parent / "synth" / "datasets"
CSV_NAME = "demo.csv"
SCHEMA_NAME = "demo-schema.json"

AGE_EDGES = [18, 25, 35, 45, 55, 65, 90]
SEXES = ["female", "male"]
REGIONS = ["northeast", "midwest", "south", "west"]
EDUCATION = ["primary", "secondary", "vocational", "bachelor", "postgraduate"]
EMPLOYMENT = ["employed", "unemployed", "retired", "student"]
INCOME_EDGES = [0, 10_000, 20_000, 35_000, 50_000, 75_000, 100_000, 250_000]
SMOKER = ["no", "yes"]
HEALTH = ["good", "fair", "poor"]

DESCRIPTION = (
    "SYNTHETIC household survey made by datasets/make_demo.py (seeded; no real people): "
    "the bundled demo table. age and income are numbers the edges bin (income is personal "
    "yearly income in whole hundreds, top-coded at 250000)."
)

# age groups (first year, last year, weight)
_AGE_GROUPS = [(18, 24, 0.12), (25, 34, 0.18), (35, 44, 0.17), (45, 54, 0.17), (55, 64, 0.16),
               (65, 74, 0.12), (75, 90, 0.08)]
_REGION_P = [0.17, 0.21, 0.38, 0.24]
_REGION_EDUCATION = np.array([0.3, 0.0, -0.2, 0.1])
_EDUCATION_CUTS = np.array([-2.6, -0.4, 0.6, 2.0])
_UNEMPLOYMENT = np.array([0.14, 0.08, 0.06, 0.04, 0.03])
_REGION_UNEMPLOYMENT = np.array([1.0, 0.9, 1.05, 1.1])
_MEDIAN_WAGE = np.array([24_000, 34_000, 42_000, 62_000, 85_000], dtype=float)
_REGION_WAGE = np.array([1.12, 0.95, 0.93, 1.08])
_SMOKING_EDUCATION = np.array([0.9, 0.5, 0.3, -0.4, -0.9])
_SMOKING_REGION = np.array([-0.1, 0.2, 0.3, -0.4])
_TOP_CODE = 250_000


def schema_dict() -> dict:
    """The public schema, in synth's JSON format (``synth.data.schema.Schema.from_dict``)."""
    return {
        "version": 1,
        "description": DESCRIPTION,
        "columns": [
            {"name": "age", "type": "numeric", "edges": AGE_EDGES},
            {"name": "sex", "type": "categorical", "values": SEXES},
            {"name": "region", "type": "categorical", "values": REGIONS},
            {"name": "education", "type": "categorical", "values": EDUCATION},
            {"name": "employment", "type": "categorical", "values": EMPLOYMENT},
            {"name": "income", "type": "numeric", "edges": INCOME_EDGES},
            {"name": "smoker", "type": "categorical", "values": SMOKER},
            {"name": "health", "type": "categorical", "values": HEALTH},
        ],
    }


def schema_text() -> str:
    """The schema file's text: one column per line, like the other bundled schemas."""
    obj = schema_dict()
    head = {k: v for k, v in obj.items() if k != "columns"}
    lines = [f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}," for k, v in head.items()]
    columns = ",\n".join("    " + json.dumps(c, ensure_ascii=False) for c in obj["columns"])
    return "{\n" + "\n".join(lines) + '\n  "columns": [\n' + columns + "\n  ]\n}\n"


def _logistic(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def generate(rows: int = DEFAULT_ROWS, seed: int = DEFAULT_SEED) -> pd.DataFrame:
    """``rows`` rows of the synthetic survey, drawn from the model in the module docstring."""
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        raise ValueError(f"rows ({rows!r}) must be an integer >= 1")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed ({seed!r}) must be an integer >= 0")
    rng = np.random.default_rng(seed)
    n = rows

    # 1. age
    group = rng.choice(len(_AGE_GROUPS), size=n, p=[w for _, _, w in _AGE_GROUPS])
    first = np.array([a for a, _, _ in _AGE_GROUPS])[group]
    span = np.array([b - a + 1 for a, b, _ in _AGE_GROUPS])[group]
    age = first + np.floor(rng.random(n) * span).astype(np.int64)

    # 2. sex (0 female, 1 male)
    p_female = np.where(age >= 75, 0.58, np.where(age >= 65, 0.53, 0.50))
    male = (rng.random(n) >= p_female).astype(np.int64)

    # 3. region, independent of age and sex
    region = rng.choice(len(REGIONS), size=n, p=_REGION_P)

    # 4. education
    female = male == 0
    sex_by_age = np.where(female & (age < 45), 0.3, 0.0) + np.where(female & (age >= 65), -0.4, 0.0)
    latent = -0.025 * (age - 45) + _REGION_EDUCATION[region] + sex_by_age + rng.logistic(size=n)
    education = np.searchsorted(_EDUCATION_CUTS, latent)
    cap = np.select([age < 21, age == 21, age < 24], [1, 2, 3], default=4)
    education = np.minimum(education, cap)

    # 5. employment (0 employed, 1 unemployed, 2 retired, 3 student)
    degree = education >= 3
    p_retired = _logistic((age - 64 - degree) / 2.0)
    p_student = np.select(
        [age < 20, age < 22, age < 25, age < 30, age < 35], [0.65, 0.55, 0.35, 0.10, 0.03], default=0.01
    ) * np.select([education == 0, education == 3], [0.4, 1.3], default=1.0)
    p_unemployed = _UNEMPLOYMENT[education] * np.where(age < 25, 1.5, 1.0) * _REGION_UNEMPLOYMENT[region]
    u = rng.random((n, 3))
    employment = np.select(
        [u[:, 0] < p_retired, u[:, 1] < p_student, u[:, 2] < p_unemployed], [2, 3, 1], default=0
    )

    # 6. income
    part_time = rng.random(n) < np.where(female, 0.22, 0.08)
    wage = (
        _MEDIAN_WAGE[education]
        * np.exp(-0.0004 * (age - 50.0) ** 2)
        * np.where(female, 0.82, 1.0)
        * _REGION_WAGE[region]
        * np.where(part_time, 0.5, 1.0)
    )
    noise = rng.standard_normal(n)
    none = rng.random(n)
    income = np.select(
        [employment == 0, employment == 1, employment == 2],
        [
            wage * np.exp(0.45 * noise),
            np.where(none < 0.20, 0.0, 9_000 * np.exp(0.6 * noise)),
            (16_000 + 0.3 * _MEDIAN_WAGE[education]) * _REGION_WAGE[region] * np.exp(0.45 * noise),
        ],
        default=np.where(none < 0.35, 0.0, 7_000 * np.exp(0.8 * noise)),
    )
    income = np.minimum(np.round(income / 100.0) * 100.0, _TOP_CODE).astype(np.int64)

    # 7. smoker
    age_smoking = np.select([age < 25, age < 45, age < 65, age < 75], [0.2, 0.4, 0.2, -0.3], default=-1.0)
    logit = (
        -1.8 + age_smoking + _SMOKING_EDUCATION[education] + 0.3 * male + _SMOKING_REGION[region]
        + 0.5 * (employment == 1)
    )
    smoker = (rng.random(n) < _logistic(logit)).astype(np.int64)

    # 8. health (0 good, 1 fair, 2 poor)
    latent = (
        2.2
        - 0.04 * (age - 18)
        + 0.25 * (education - 2)
        + 0.45 * np.log((income + 3_000) / 30_000)
        - 0.4 * (employment == 1)
        - smoker * (0.3 + 0.02 * (age - 18))
        + rng.logistic(size=n)
    )
    health = np.select([latent < -1.0, latent < 0.5], [2, 1], default=0)

    return pd.DataFrame(
        {
            "age": age,
            "sex": np.asarray(SEXES, dtype=object)[male],
            "region": np.asarray(REGIONS, dtype=object)[region],
            "education": np.asarray(EDUCATION, dtype=object)[education],
            "employment": np.asarray(EMPLOYMENT, dtype=object)[employment],
            "income": income,
            "smoker": np.asarray(SMOKER, dtype=object)[smoker],
            "health": np.asarray(HEALTH, dtype=object)[health],
        }
    )


def write(folder: Path, rows: int = DEFAULT_ROWS, seed: int = DEFAULT_SEED) -> tuple[Path, Path]:
    """Write ``demo.csv`` and ``demo-schema.json`` into ``folder``; return their paths."""
    frame = generate(rows, seed)
    folder.mkdir(parents=True, exist_ok=True)
    csv_path, schema_path = folder / CSV_NAME, folder / SCHEMA_NAME
    frame.to_csv(csv_path, index=False, lineterminator="\n", encoding="utf-8")
    schema_path.write_text(schema_text(), encoding="utf-8", newline="\n")
    return csv_path, schema_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Write the SYNTHETIC demo survey (demo.csv) and its schema (demo-schema.json).",
        epilog="example: python datasets/make_demo.py --rows 5000 --seed 3 -o /tmp/demo",
    )
    parser.add_argument("--rows", type=int, default=DEFAULT_ROWS,
                        help=f"rows to draw (default {DEFAULT_ROWS})")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"RNG seed (default {DEFAULT_SEED})")
    parser.add_argument("-o", "--output", type=Path, default=BUNDLED,
                        help="folder to write into (default: synth/datasets/, the bundled copy)")
    args = parser.parse_args(argv)
    if args.rows < 1:
        parser.error(f"--rows ({args.rows}) must be >= 1")
    if args.seed < 0:
        parser.error(f"--seed ({args.seed}) must be >= 0")
    csv_path, schema_path = write(args.output, args.rows, args.seed)
    print(f"wrote {csv_path} ({args.rows} rows, seed {args.seed}) and {schema_path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
