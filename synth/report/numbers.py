"""How the report shows a number: one helper for the HTML page, the plots' labels and the
command's stderr lines (summary.json and answers.csv keep full precision for programs).

Three kinds:

* ``"error"`` (the default): errors, L1 distances, relative errors, the KL potential: three
  significant figures, trailing zeros kept so that columns compare (``0.0712``, ``0.200``,
  ``1.23e-05``); an exact zero is ``0``;
* ``"count"``: rows and query counts: thousands separators (``6,000``); a count scaled from a
  fraction, which need not be whole, has one decimal (``1,234.5``) unless it rounds to a whole
  number;
* ``"privacy"``: epsilon and delta: at most three significant figures, no trailing zeros
  (``1``, ``0.625``, ``1e-06``).

``None`` (or a non-finite value) is ``n/a``.
"""

from __future__ import annotations

import math

__all__ = ["COUNT", "ERROR", "KINDS", "PRIVACY", "fmt"]

ERROR = "error"
COUNT = "count"
PRIVACY = "privacy"
KINDS = (ERROR, COUNT, PRIVACY)
MISSING = "n/a"


def fmt(value, kind: str = ERROR) -> str:
    """``value`` as the report shows a number of ``kind`` (see the module docstring)."""
    if kind not in KINDS:
        raise ValueError(f"kind ({kind!r}) must be one of: {', '.join(KINDS)}")
    if value is None or isinstance(value, bool):
        return MISSING
    value = float(value)
    if not math.isfinite(value):
        return MISSING
    if kind == COUNT:
        rounded = round(value, 1)  # 1.0000000000000002 rows is 1 row
        return f"{int(rounded):,}" if rounded.is_integer() else f"{rounded:,.1f}"
    if kind == PRIVACY:
        return f"{value:.3g}"
    if value == 0:
        return "0"
    text = f"{value:#.3g}"
    return text[:-1] if text.endswith(".") else text  # 123. -> 123
