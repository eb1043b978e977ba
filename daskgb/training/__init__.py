"""Training: train() as a short loop over the rounds of one planned path.

options.py   TrainingOptions: a fit's options, checked once (front ends, daskgb.dask, workers)
plan.py      the one planner: the Path a fit's rounds take, and why faster ones were refused
fit.py       one fit's set-up and the host's work around each round (model, evals, callbacks, checkpoints)
rounds.py    how each path grows a round's trees and moves the margins
gradients.py a round's gradient pairs (objective or obj=, sampled)
evaluation.py the eval sets watched each round
resume.py    going on from a checkpoint
loop.py      train() and run()
"""

from .loop import run, train
from .options import TrainingOptions
from .plan import Path, RoundPlan

__all__ = ["train", "run", "TrainingOptions", "Path", "RoundPlan"]
