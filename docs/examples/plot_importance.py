"""
Which features held up across eras
==================================

``importance_type="gain"`` sums the pooled gain of a feature's splits;
``"des"`` sums the DES scores, the gain that held up across the eras. On data
where some features carry signal only in some eras, the two rankings differ.
"""

import matplotlib.pyplot as plt

import packboost
from packboost import PackBoostRegressor
from packboost.datasets import make_smooth_drift

data = make_smooth_drift(n_rows=20_000, n_features=20, n_eras=60, random_state=0)
model = PackBoostRegressor(n_estimators=40, max_depth=4, random_state=0)
model.fit(data.X, data.y, era=data.era)

figure, axes = plt.subplots(1, 2, figsize=(9, 4))
packboost.plot_importance(model, importance_type="gain", max_features=10, ax=axes[0])
packboost.plot_importance(model, importance_type="des", max_features=10, ax=axes[1])
figure.tight_layout()
