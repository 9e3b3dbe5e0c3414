"""Fit time: building and calibrating the rule library from an auxiliary corpus (weak labels,
the numerical optimiser and its search space, the calibration loop, cross-validation, synthetic
corpora for tests). Query time (matcher, adapter, composition, resolution) lives one level up and
never imports this package."""
