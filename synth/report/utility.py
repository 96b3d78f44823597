"""Machine-learning utility of a synthetic table: train on synthetic, test on real (NON-PRIVATE).

``ml_utility`` predicts one column (the target, its codes as classes; a numeric target's
classes are its bins) from the others with two classifiers, each trained twice: on the
synthetic table, and on real training rows (the ceiling), both tested on the same real test
rows:

* ``gradient_boosting``: ``sklearn.ensemble.HistGradientBoostingClassifier`` (categorical and
  coded columns as categories, numbers raw with missing values as NaN, which it handles);
* ``logistic_regression``: one-hot categorical and coded columns (the missing value one more
  category), numbers imputed by the training median with a missing indicator, then scaled.

Each reports ``accuracy`` and ``roc_auc`` (binary targets: the AUC of the second class;
more classes: the macro mean of one-vs-rest AUCs over the classes present in the test rows,
a class the training rows lack scored with probability 0).

scikit-learn is an optional extra (``pip install 'synth[eval]'``) imported only here, when the
measure is computed; ``require_sklearn`` says so in one line. Everything here reads the real
data: the numbers are NOT differentially private.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from synth.data.schema import Categorical, Numeric
from synth.errors import SynthError
from synth.report.numbers import fmt

__all__ = ["MODELS", "SPLIT_SEED", "SklearnMissing", "ml_utility", "require_sklearn", "split", "utility_text"]

#: Summary key -> label of each classifier.
MODELS = {"gradient_boosting": "gradient boosting", "logistic_regression": "logistic regression"}
#: The seed of the 70/30 split of the real table when no held-out test table is given.
SPLIT_SEED = 0
TRAIN_SHARE = 0.7
SKLEARN_MESSAGE = "--target needs scikit-learn, an optional extra: pip install 'synth[eval]'"


class SklearnMissing(SynthError):
    """scikit-learn is not installed."""


def require_sklearn() -> None:
    """``SklearnMissing`` (one line naming ``pip install 'synth[eval]'``) unless sklearn imports."""
    try:
        import sklearn.ensemble  # noqa: F401
        import sklearn.linear_model  # noqa: F401
    except ImportError:
        raise SklearnMissing(SKLEARN_MESSAGE) from None


def split(n: int, *, seed: int = SPLIT_SEED, train_share: float = TRAIN_SHARE) -> tuple[np.ndarray, np.ndarray]:
    """Row indices ``(train, test)``: a fixed-seed permutation split ``train_share`` / the rest."""
    order = np.random.default_rng(seed).permutation(n)
    cut = int(round(train_share * n))
    return np.sort(order[:cut]), np.sort(order[cut:])


def _features(table, target: str) -> tuple[np.ndarray, np.ndarray, list[bool]]:
    """Features (float64: codes of categorical and coded columns, raw numbers with NaN),
    the target's codes, and which features are categorical."""
    columns, categorical = [], []
    for j, column in enumerate(table.schema):
        if column.name == target:
            continue
        if isinstance(column, Numeric):
            columns.append(table.numbers[column.name])
            categorical.append(False)
        else:
            columns.append(table.codes[:, j].astype(np.float64))
            categorical.append(True)
    y = table.codes[:, list(table.schema.names).index(target)].astype(np.int64)
    x = np.column_stack(columns) if columns else np.zeros((table.n_rows, 0))
    return x, y, categorical


def _classifiers(schema, target: str, categorical: list[bool]) -> dict[str, Any]:
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    sizes = [c.size for c in schema if c.name != target]
    # HistGradientBoosting takes categories of at most 255 codes; a larger coded column stays ordinal
    mask = [cat and size <= 255 for cat, size in zip(categorical, sizes)]
    gbm = HistGradientBoostingClassifier(categorical_features=np.array(mask, dtype=bool) if mask else None,
                                         random_state=SPLIT_SEED)
    cats = [i for i, c in enumerate(categorical) if c]
    nums = [i for i, c in enumerate(categorical) if not c]
    parts = []
    if cats:
        parts.append(("categories", OneHotEncoder(handle_unknown="ignore"), cats))
    if nums:
        parts.append(("numbers", make_pipeline(SimpleImputer(strategy="median", add_indicator=True),
                                               StandardScaler()), nums))
    logistic = make_pipeline(ColumnTransformer(parts), LogisticRegression(max_iter=1000))
    return {"gradient_boosting": gbm, "logistic_regression": logistic}


def _probabilities(model, x: np.ndarray, classes: int) -> np.ndarray:
    """Predicted probabilities over every code of the target (0 for a code not trained on)."""
    out = np.zeros((x.shape[0], classes))
    out[:, model.classes_.astype(np.int64)] = model.predict_proba(x)
    return out


def _auc(y: np.ndarray, proba: np.ndarray) -> float | None:
    from sklearn.metrics import roc_auc_score

    present = [c for c in np.unique(y).tolist()]
    if len(present) < 2:
        return None
    if len(present) == 2:
        return float(roc_auc_score(y == present[1], proba[:, present[1]]))
    return float(np.mean([roc_auc_score(y == c, proba[:, c]) for c in present]))


def _score(model, x_train, y_train, x_test, y_test, classes: int) -> dict[str, float | None]:
    trained = np.unique(y_train)
    if trained.size < 2:  # one class only: predict it
        proba = np.zeros((x_test.shape[0], classes))
        if trained.size:
            proba[:, int(trained[0])] = 1.0
    else:
        model.fit(x_train, y_train)
        proba = _probabilities(model, x_test, classes)
    predicted = proba.argmax(axis=1)
    return {"accuracy": float(np.mean(predicted == y_test)), "roc_auc": _auc(y_test, proba)}


def ml_utility(train_real, test_real, synthetic, target: str, *, split_note: str) -> dict[str, Any]:
    """Train on ``synthetic`` and on ``train_real``, test both on ``test_real`` (``Table``s
    under one schema). Returns ``{target, target_kind, classes, test, rows: {...}, models:
    {name: {label, train_synthetic: {accuracy, roc_auc}, train_real: {...}}}}``."""
    require_sklearn()
    from sklearn.base import clone

    schema = train_real.schema
    if target not in schema.names:
        raise ValueError(f"target ({target!r}) must be one of the columns: {', '.join(schema.names)}")
    if len(schema) < 2:
        raise ValueError("target: there is no other column to predict it from")
    column = schema[target]
    classes = column.size
    x_real, y_real, categorical = _features(train_real, target)
    x_syn, y_syn, _ = _features(synthetic, target)
    x_test, y_test, _ = _features(test_real, target)
    models = {}
    for name, model in _classifiers(schema, target, categorical).items():
        models[name] = {"label": MODELS[name],
                        "train_synthetic": _score(clone(model), x_syn, y_syn, x_test, y_test, classes),
                        "train_real": _score(clone(model), x_real, y_real, x_test, y_test, classes)}
    kind = "numeric (its bins)" if isinstance(column, Numeric) else \
        "categorical" if isinstance(column, Categorical) else "coded"
    return {"target": target, "target_kind": kind, "classes": int(len(np.unique(y_test))), "test": split_note,
            "rows": {"train_synthetic": synthetic.n_rows, "train_real": train_real.n_rows,
                     "test_real": test_real.n_rows},
            "models": models}


def utility_text(utility: dict[str, Any]) -> str:
    """One line for stderr: each classifier's accuracy and AUC trained on synthetic and on real."""
    parts = []
    for name, entry in utility["models"].items():
        syn, real = entry["train_synthetic"], entry["train_real"]
        parts.append(f"{entry['label']} accuracy {fmt(syn['accuracy'])} (real {fmt(real['accuracy'])}), "
                     f"ROC AUC {fmt(syn['roc_auc'])} (real {fmt(real['roc_auc'])})")
    return (f"ML utility, predicting {utility['target']} trained on synthetic (on real: the ceiling), tested on "
            f"{utility['test']}: " + "; ".join(parts))
