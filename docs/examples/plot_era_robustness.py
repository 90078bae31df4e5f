"""
DES against the pooled gain on eras whose signal flips
=======================================================

:func:`packboost.datasets.make_sign_flip` makes era data in which two strong
features reverse their effect in a minority of eras. A model that leans on
them does well on most eras and badly on the flipped ones. With
``lambda_dro=0`` PackBoost scores splits by the pooled gain, as LightGBM and
XGBoost do; with the default ``lambda_dro=1`` a split is penalised for how
much the eras disagree about it. The held-out per-era correlations show the
difference.
"""

import matplotlib.pyplot as plt
import numpy as np

from packboost import PackBoostRegressor
from packboost.datasets import make_sign_flip
from packboost.metrics import era_summary, per_era_correlation

data = make_sign_flip(n_rows=100_000, n_features=100, n_eras=200, random_state=0)
train, valid = data.split_by_era(holdout_fraction=0.25)

scores = {}
for label, lambda_dro in (("pooled gain (lambda_dro=0)", 0.0), ("DES (lambda_dro=1)", 1.0)):
    model = PackBoostRegressor(n_estimators=100, max_depth=4, layer_feature_fraction=0.5,
                               lambda_dro=lambda_dro, random_state=0)
    model.fit(train.X, train.y, era=train.era)
    eras, correlation = per_era_correlation(valid.y, model.predict(valid.X), valid.era)
    scores[label] = correlation
    summary = era_summary(correlation)
    print(f"{label:28s} mean {summary['mean']:.4f}  sharpe {summary['sharpe']:.3f}  "
          f"worst {summary['worst']:.4f}  max_drawdown {summary['max_drawdown']:.4f}")

# %%
# The pooled gain reaches the higher mean by leaning on the strong features,
# and gives it back in the eras where they flip; DES has the higher Sharpe,
# half the worst era and a quarter of the drawdown.

# %%
# The running sum of the held-out correlations, era by era: the steadier the
# line, the fewer eras the model lost.
figure, ax = plt.subplots(figsize=(7, 3.5))
for label, correlation in scores.items():
    ax.plot(np.arange(len(correlation)), np.cumsum(correlation), label=label)
ax.set_xlabel("held-out era")
ax.set_ylabel("cumulative correlation")
ax.legend()
figure.tight_layout()
