"""
Early stopping on a per-era metric
==================================

An eval set given with its eras is scored era by era after every round.
Early stopping watches the first metric (here the mean per-era Numerai
correlation) and keeps the best rounds; :func:`packboost.plot_metric` draws
the learning curve with the best round marked.
"""

import packboost
from packboost import PackBoostRegressor
from packboost.datasets import make_numerai_like

data = make_numerai_like(n_rows=20_000, n_features=20, n_eras=60, n_informative=8,
                         random_state=0)
train, valid = data.split_by_era(holdout_fraction=0.25)
model = PackBoostRegressor(n_estimators=150, max_depth=4, random_state=0)
model.fit(train.X, train.y, era=train.era, eval_set=[(valid.X, valid.y, valid.era)],
          eval_metric=["numerai_mean", "numerai_sharpe"], early_stopping_rounds=15)
print("rounds grown:", len(model.evals_result_["valid_0"]["numerai_mean"]),
      "kept:", model.best_iteration_)
print("best scores:", model.best_score_["valid_0"])

# %%
# The curve of the watched metric; the dashed line marks the round kept.
packboost.plot_metric(model, "numerai_mean")
