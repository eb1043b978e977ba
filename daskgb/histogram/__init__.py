"""The histogram stage: gradient sums per bin of the nodes a step builds, summed over the workers.

quantiser.py: a round's gradient pairs in the type the histograms sum (XGBoost's
GradientQuantiser: int64 fixed point on the GPU, whose sums are exact in any order).
"""
