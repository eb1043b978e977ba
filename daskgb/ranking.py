"""Learning to rank (LambdaMART): query groups, the rank:pairwise / rank:ndcg / rank:map objectives and the
ndcg / map / pre metrics, to XGBoost 3's definitions (src/objective/lambdarank_obj.*, src/metric/rank_metric.*).

Everything is array code over all queries at once, generic over ``xp`` (numpy or
cupy), so the GPU runs it unchanged: one segmented sort puts every query's rows in
model order, the document pairs of all queries are enumerated as flat arrays
(in chunks, to bound memory), and per-row and per-query sums are bincounts. On the GPU the
pairs' loop is one kernel instead (ranking_cuda): a thread a pair, summing with atomics.

A query group is a run of contiguous rows. On several workers each worker holds
whole groups (the Dask layer checks it), so gradients are local; the only global
quantities (the weight normaliser, metric sums) are reduced with the communicator.
"""

from __future__ import annotations

import re

import numpy as np

from .arrays import array_module, to_host
from .objective import Objective, _sigmoid

PAIR_METHODS = ("topk", "mean")
# XGBoost's defaults for lambdarank_num_pair_per_sample: the truncation level of topk,
# the number of sampled pairs per document of mean.
DEFAULT_NUM_PAIR = {"topk": 32, "mean": 1}
# XGBoost 3.2 scores a ranking metric named without @k (ndcg, map, pre) at this truncation, the
# default k of its LambdaRankParam; only the default metric of rank:ndcg / rank:pairwise under the
# mean method scores whole lists (checked against xgboost 3.2).
DEFAULT_METRIC_K = 32
MAX_EXP_GAIN_LABEL = 31  # 2^label - 1 must fit XGBoost's 32-bit relevance degree
# Pairs evaluated at once by the numpy loop of LambdaRank._gradient (the oracle): a chunk's
# temporaries are ~16 arrays of 8 bytes a pair. CuPy arrays take no chunks: one kernel a round
# (ranking_cuda, kernels/ranking.cu) evaluates every pair without materialising any.
PAIR_CHUNK = 1 << 21


# --------------------------------------------------------------------------- query groups


class Groups:
    """The query groups of a matrix's rows: group g is rows ptr[g]:ptr[g+1] (contiguous, in row order).

    ptr and keys live on the host (one entry per group). ``keys`` are the groups'
    ordinals among all ``n_total`` groups of the data set (on one worker of several,
    not 0..n-1); they seed pair sampling as XGBoost's group index does, so a group
    draws the same pairs wherever it lives. ``weight`` is one weight per group (as
    XGBoost's ranking weights are), on the matrix's device, or None.
    """

    def __init__(self, ptr, keys=None, weight=None, n_total=None):
        self.ptr = np.asarray(ptr, dtype=np.int64)
        self.keys = np.arange(self.n_groups, dtype=np.int64) if keys is None else np.asarray(keys, dtype=np.int64)
        self.n_total = self.n_groups if n_total is None else int(n_total)
        self.weight = weight
        self._on: dict = {}

    @property
    def n_groups(self) -> int:
        return int(self.ptr.size - 1)

    @property
    def n_rows(self) -> int:
        return int(self.ptr[-1])

    @classmethod
    def single(cls, n_rows: int) -> "Groups":
        """All rows one group: XGBoost's reading of ranking data without query ids."""
        return cls(np.array([0, n_rows], dtype=np.int64))

    def to(self, xp) -> "Groups":
        """These groups with their weights on xp's device (the host arrays are shared)."""
        if self.weight is None or array_module(self.weight) is xp:
            return self
        return Groups(self.ptr, self.keys, xp.asarray(self.weight) if xp is not np else to_host(self.weight),
                      self.n_total)

    def device_arrays(self, xp):
        """(ptr, row -> group, keys) on xp's device, made once per device."""
        name = xp.__name__
        if name not in self._on:
            ptr = xp.asarray(self.ptr)
            row_group = xp.searchsorted(ptr[1:], xp.arange(self.n_rows, dtype=xp.int64), side="right")
            self._on[name] = (ptr, row_group.astype(xp.int64), xp.asarray(self.keys))
        return self._on[name]


def groups_from_qid(qid, n_rows: int) -> Groups:
    """Groups from a per-row query id: ids must be non-negative integers, non-decreasing (XGBoost's rule:
    the rows of a query are contiguous and queries come in ascending id)."""
    q = host_integers(qid, "qid", "query ids")
    if q.shape[0] != n_rows:
        raise ValueError(f"qid has {q.shape[0]} entries but X has {n_rows} rows")
    if q.size and int(q.max()) > np.iinfo(np.uint32).max:
        raise ValueError("qid must fit in 32 bits (XGBoost reads query ids as uint32)")
    step = np.diff(q)
    if np.any(step < 0):
        at = int(np.flatnonzero(step < 0)[0]) + 1
        raise ValueError(f"qid must be sorted in non-decreasing order, with the rows of each query contiguous "
                         f"(XGBoost's rule); row {at} has qid {q[at]} after {q[at - 1]}. Sort the rows by qid "
                         "(stably, to keep each query's order) first")
    starts = np.concatenate([[0], np.flatnonzero(step) + 1]) if n_rows else np.zeros(0, np.int64)
    return Groups(np.concatenate([starts, [n_rows]]).astype(np.int64))


def groups_from_sizes(group, n_rows: int) -> Groups:
    """Groups from group sizes (XGBoost's ``group=``): non-negative integers summing to the number of rows."""
    g = host_integers(group, "group", "group sizes")
    if int(g.sum()) != n_rows:
        raise ValueError(f"group sizes sum to {int(g.sum())} but X has {n_rows} rows; each row must be in "
                         "exactly one query group")
    return Groups(np.concatenate([[0], np.cumsum(g)]).astype(np.int64))


def host_integers(v, what: str, meaning: str) -> np.ndarray:
    """A host int64 vector of non-negative integers (integer-valued floats accepted), checked."""
    a = _host_vector(v, what)
    if a.dtype.kind == "f" and (not np.all(np.isfinite(a)) or np.any(a != np.floor(a))):
        raise ValueError(f"{what} must hold integer {meaning}; it has NaN, infinite or fractional values")
    a = a.astype(np.int64)
    if a.size and int(a.min()) < 0:
        # XGBoost reads query ids and group sizes as unsigned integers.
        raise ValueError(f"{what} must hold non-negative {meaning}")
    return a


def concat_groups(parts, n_total: int) -> Groups:
    """The groups of several row blocks stacked in order (a worker's partitions; their keys already global)."""
    ptrs, keys, offset = [np.zeros(1, np.int64)], [], 0
    for g in parts:
        ptrs.append(g.ptr[1:] + offset)
        keys.append(g.keys)
        offset += g.n_rows
    return Groups(np.concatenate(ptrs), np.concatenate(keys) if keys else np.zeros(0, np.int64), n_total=n_total)


def group_weights(weight, groups: Groups, what: str = "weight", per_row_ok: bool = False):
    """Per-group weights from ``weight``: one per group (XGBoost's rule for ranking), or, with per_row_ok
    (Dask, where every vector is partitioned like X), one per row, equal within each group.
    Returns a host float32 array or None."""
    if weight is None:
        return None
    w = _host_vector(weight, what).astype(np.float32)
    if w.shape[0] == groups.n_groups:
        return w
    if per_row_ok and w.shape[0] == groups.n_rows:
        starts = groups.ptr[:-1][np.diff(groups.ptr) > 0]
        first = np.repeat(w[groups.ptr[:-1]] if groups.n_rows else w[:0], np.diff(groups.ptr))
        bad = np.flatnonzero(w != first)
        if bad.size:
            raise ValueError(f"{what} differs within a query group (row {int(bad[0])}); ranking weights are "
                             "per query group: give every row of a group its group's weight")
        out = np.ones(groups.n_groups, np.float32)
        out[np.diff(groups.ptr) > 0] = w[starts]
        return out
    raise ValueError(f"{what} has {w.shape[0]} entries for {groups.n_groups} query groups; ranking weights are "
                     "per query group (XGBoost's rule), one weight per group")


def _host_vector(v, what):
    if hasattr(v, "to_numpy"):
        v = v.to_numpy()
    a = to_host(v) if not isinstance(v, (list, tuple)) else np.asarray(v)
    a = np.asarray(a)
    if a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.ndim != 1:
        raise ValueError(f"{what} must be 1-dimensional, got shape {a.shape}")
    if a.dtype.kind not in "biuf":
        raise ValueError(f"{what} must be numeric, got dtype {a.dtype}")
    return a


# --------------------------------------------------------------------------- sorting within groups


def _descending_bits(xp, v):
    """uint64 keys whose ascending order is v's descending order (float32 v; -0 equals +0)."""
    v = xp.asarray(v, dtype=xp.float32) + xp.float32(0.0)  # -0.0 + 0.0 is +0.0: XGBoost's comparison ties them
    b = v.view(xp.uint32).astype(xp.uint64)
    negative = (b >> xp.uint64(31)) == xp.uint64(1)
    ascending = xp.where(negative, xp.uint64(0xFFFFFFFF) - b, b | xp.uint64(0x80000000))
    return xp.uint64(0xFFFFFFFF) - ascending


def sort_within_groups(xp, values, row_group):
    """The row order that sorts every group's values in descending order, ties in row order (a stable
    sort, as XGBoost's ArgSort with std::greater); groups keep their places."""
    key = (row_group.astype(xp.uint64) << xp.uint64(32)) | _descending_bits(xp, values)
    # CuPy always sorts stably (thrust), and older releases take no kind=.
    return xp.argsort(key, kind="stable") if xp is np else xp.argsort(key)


class _Ranked:
    """One ordering of every group's rows: position p of the ranked list holds row order[p]."""

    def __init__(self, xp, groups: Groups, values):
        ptr, row_group, _ = groups.device_arrays(xp)
        self.order = sort_within_groups(xp, values, row_group)
        # Sorting within groups keeps each group's block, so position p belongs to row_group[p].
        self.group = row_group
        self.start = ptr[:-1]
        self.count = ptr[1:] - ptr[:-1]
        self.rank = xp.arange(row_group.shape[0], dtype=xp.int64) - self.start[row_group]


def _discount(xp, rank):
    return 1.0 / xp.log2(rank.astype(xp.float64) + 2.0)


def _gain(xp, label, exp_gain: bool):
    if exp_gain:  # XGBoost's CalcDCGGain: (1 << label) - 1 on the label as a 32-bit unsigned integer
        return (xp.left_shift(xp.int64(1), label.astype(xp.int64)) - 1).astype(xp.float64)
    return label.astype(xp.float64)


def _segment_sum(xp, group, values, n_groups):
    if xp is np:
        return np.bincount(group, weights=values, minlength=n_groups)[:n_groups]
    import cupyx  # cupy's bincount reads the largest id on the host first: a wait for the device

    out = xp.zeros(n_groups, dtype=xp.float64)
    cupyx.scatter_add(out, group, values.astype(xp.float64))
    return out


def _idcg(xp, groups: Groups, y, topk: int | None, exp_gain: bool):
    """Ideal DCG of every group, over its best topk labels (all with topk None)."""
    ideal = _Ranked(xp, groups, y)
    keep = ideal.rank < (topk if topk is not None else np.iinfo(np.int64).max)
    gain = _gain(xp, y[ideal.order], exp_gain) * _discount(xp, ideal.rank)
    return _segment_sum(xp, ideal.group, xp.where(keep, gain, 0.0), groups.n_groups)


# --------------------------------------------------------------------------- label checks


def check_ndcg_labels(xp, y, exp_gain: bool, what: str) -> None:
    if not exp_gain:
        return
    bad = int(((y != xp.floor(y)) | (y < 0)).sum())
    if bad:
        raise ValueError(f"{what} with ndcg_exp_gain=True needs relevance degrees as labels (0 or positive "
                         f"integers); {bad} labels are not (set ndcg_exp_gain=False for other gains)")
    big = int((y > MAX_EXP_GAIN_LABEL).sum())
    if big:
        raise ValueError(f"{what} with ndcg_exp_gain=True needs relevance degrees <= {MAX_EXP_GAIN_LABEL} "
                         f"(the gain is 2^label - 1); {big} labels are larger. Set ndcg_exp_gain=False for "
                         "linear gains")


def check_binary_labels(xp, y, what: str) -> None:
    bad = int(((y != 0) & (y != 1)).sum())
    if bad:
        raise ValueError(f"{what} needs binary relevance labels (0 or 1); {bad} labels are not")


# --------------------------------------------------------------------------- objectives


# XGBoost's mean method draws with std::minstd_rand (x <- 48271 x mod 2^31 - 1) seeded per query, and
# libstdc++'s uniform_int_distribution (downscaling with rejection) on top of it.
_MINSTD_M = 2147483647
_MINSTD_A = 48271


def _minstd_power(xp, k):
    """48271^k mod (2^31 - 1) for a uint64 array of exponents (square and multiply over k's bits)."""
    out = xp.ones(k.shape, dtype=xp.uint64)
    m = xp.uint64(_MINSTD_M)
    p, bit = _MINSTD_A, 0
    top = int(k.max()) if k.shape[0] else 0
    while (top >> bit) > 0:
        take = ((k >> xp.uint64(bit)) & xp.uint64(1)).astype(bool)
        out = xp.where(take, (out * xp.uint64(p)) % m, out)  # both factors < 2^31: no overflow
        p, bit = p * p % _MINSTD_M, bit + 1
    return out


def _minstd_uniform(xp, state0, draw, n_choices, group):
    """XGBoost's draws: the ``draw``-th call (0-based, in its query's order) of
    uniform_int_distribution(0, n_choices - 1) on a minstd_rand in state ``state0``.

    A raw output x is rejected (and the next one read) when x - 1 >= n * ((2^31 - 3) // n),
    which shifts every later draw of that query by one output. Rejections are rare (under
    n / 2^31 per draw), so they are found and fixed in a loop, earliest per query first."""
    n = n_choices.astype(xp.uint64)
    scaling = xp.uint64(_MINSTD_M - 2) // n
    past = n * scaling
    draw = draw.astype(xp.uint64)
    shift = xp.zeros(draw.shape, dtype=xp.uint64)
    while True:
        ret = state0 * _minstd_power(xp, draw + shift + xp.uint64(1)) % xp.uint64(_MINSTD_M) - xp.uint64(1)
        rejected = ret >= past
        if not bool(rejected.any()):
            return (ret // scaling).astype(xp.int64)
        g_r, t_r = to_host(group[rejected]), to_host(draw[rejected] + shift[rejected])
        first = np.full(int(g_r.max()) + 1, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first, g_r, t_r.astype(np.int64))
        first = xp.asarray(first)
        in_range = group < first.shape[0]
        at = first[xp.where(in_range, group, 0)]
        shift = shift + ((draw + shift).astype(xp.int64) >= at).astype(xp.uint64) * in_range.astype(xp.uint64)


class LambdaRank(Objective):
    """LambdaMART with XGBoost 3's pair construction, delta metrics and normalisations.

    Pairs (lambdarank_pair_method): "topk" pairs each of the model's first k
    documents of a query with every document ranked below it (k =
    lambdarank_num_pair_per_sample, default 32); "mean" pairs every document with
    lambdarank_num_pair_per_sample (default 1) documents of other labels, drawn from
    XGBoost's own random stream (so the pairs are XGBoost's). A pair's lambda is
    sigmoid(s_i - s_j) - 1 scaled by |delta metric|, divided by |s_i - s_j| + 0.01
    when lambdarank_score_normalization is on (and the query's scores are not all
    equal); a query's gradients are scaled by
    log2(1 + L) / L (topk, L = the query's sum of |lambda|) or 1/pairs (mean) when
    lambdarank_normalization is on, then by the query's weight times
    (groups / sum of the group weights).
    """

    def __init__(self, pair_method: str = "topk", num_pair_per_sample: int | None = None,
                 normalization: bool = True, score_normalization: bool = True, ndcg_exp_gain: bool = True):
        self.pair_method = pair_method
        self.num_pair = int(num_pair_per_sample or DEFAULT_NUM_PAIR[pair_method])
        self.normalization = bool(normalization)
        self.score_normalization = bool(score_normalization)
        self.exp_gain = bool(ndcg_exp_gain)
        self.topk = self.num_pair if pair_method == "topk" else None
        self.default_metric = self._metric_base + (f"@{self.topk}" if self.topk is not None else "")
        # The truncation of the default metric when its name has no @k (see DEFAULT_METRIC_K).
        self.default_metric_k = None if (pair_method == "mean" and self._metric_base == "ndcg") \
            else DEFAULT_METRIC_K
        self._state = None

    _metric_base = "ndcg"

    # -- the train loop's hooks ------------------------------------------------

    def prepare(self, xp, dtrain, comm) -> None:
        """Per-matrix constants: the groups on the device and the global weight normaliser (groups / sum of the
        group weights, XGBoost 3.2's RankingCache::WeightNorm), summed over every worker's groups."""
        if dtrain.groups is None:
            # XGBoost reads ranking rows without query ids as one query, and then takes no weights.
            if dtrain.weight is not None:
                raise ValueError(f"{self.name} weights are per query group: give the matrix qid= or group= "
                                 "with one weight per group")
            if comm is not None and comm.world_size > 1:
                raise ValueError(f"{self.name} on several workers needs query groups (qid= or group=)")
        groups = dtrain.groups if dtrain.groups is not None else Groups.single(dtrain.n_rows)
        groups = groups.to(xp)
        n = float(groups.n_groups)
        if groups.weight is None:
            sums = np.array([n, n], dtype=np.float64)
        else:
            sums = np.array([n, float(groups.weight.astype(xp.float64).sum())], dtype=np.float64)
        if comm is not None:
            sums = comm.allreduce(sums)
        w_norm = float(sums[0] / sums[1]) if sums[1] > 0 else 1.0
        self._state = {"groups": groups, "label": dtrain.label, "w_norm": w_norm, "static": None}

    def gradient_of(self, xp, margin, dtrain, iteration: int):
        if self._state is None or self._state["label"] is not dtrain.label:
            self.prepare(xp, dtrain, None)
        return self._gradient(xp, margin, dtrain.label, iteration)

    def base_score_sums(self, xp, y, weight) -> tuple[float, float]:
        """XGBoost fits the intercept of a ranking objective as for any loss it has no closed form for: one
        Newton step from margin 0, -sum g / sum h (which pairwise gradients make ~0)."""
        if self._state is None or self._state["label"] is not y:
            raise RuntimeError("the ranking objective must be prepared with the training matrix first")
        gp = self._gradient(xp, xp.zeros(y.shape[0], dtype=xp.float32), y, 0).astype(xp.float64)
        return float(-gp[:, 0].sum()), float(gp[:, 1].sum())

    def gradient(self, xp, margin, y, weight):
        raise ValueError(f"{self.name} needs query groups: train through daskgb.train with a QuantileMatrix "
                         "built with qid= or group=")

    # -- the gradient --------------------------------------------------------

    def _static(self, xp, y):
        """Per-matrix arrays that do not change between rounds (computed on first use)."""
        st = self._state
        if st["static"] is None:
            st["static"] = self._make_static(xp, st["groups"], y)
        return st["static"]

    def _make_static(self, xp, groups, y):
        return {}

    def _delta(self, xp, st, ranked, ys, hi, lo, g):
        """|change of the metric| when the documents at ranked positions hi (higher label) and lo swap."""
        return xp.ones(hi.shape[0], dtype=xp.float64)

    def _per_round(self, xp, st, ranked, ys):
        """Quantities of the current ranking that _delta needs (none for the pairwise loss)."""
        return {}

    def _gradient(self, xp, margin, y, iteration):
        st = self._state
        groups = st["groups"]
        n, n_groups = groups.n_rows, groups.n_groups
        ranked, grad, hess, sum_lambda = self._pair_sums(xp, margin, y, iteration)

        # XGBoost accumulates a query's pairs into float gradient pairs, then scales them.
        grad32, hess32 = grad.astype(xp.float32), hess.astype(xp.float32)
        if self.normalization:
            if self.pair_method == "mean":
                norm = xp.full(n_groups, 1.0 / self.num_pair, dtype=xp.float64)
            else:
                safe = xp.where(sum_lambda > 0.0, sum_lambda, 1.0)
                norm = xp.where(sum_lambda > 0.0, xp.log2(1.0 + safe) / safe, 1.0)
            row_norm = norm[ranked.group]
            grad32 = (grad32.astype(xp.float64) * row_norm).astype(xp.float32)
            hess32 = (hess32.astype(xp.float64) * row_norm).astype(xp.float32)
        if groups.weight is not None:
            w = groups.weight.astype(xp.float32)[ranked.group]
            grad32, hess32 = grad32 * w, hess32 * w
        if st["w_norm"] != 1.0:
            grad32 = (grad32.astype(xp.float64) * st["w_norm"]).astype(xp.float32)
            hess32 = (hess32.astype(xp.float64) * st["w_norm"]).astype(xp.float32)
        out = xp.empty((n, 2), dtype=xp.float32)
        out[ranked.order, 0] = grad32
        out[ranked.order, 1] = hess32
        return out

    def _pair_sums(self, xp, margin, y, iteration):
        """(ranked, grad, hess, sum_lambda): the margins' ranking and every pair's lambdas and hessians summed
        in float64 per ranked position, and -2 lambda per query (numpy: the chunk loop, the oracle; CuPy:
        ranking_cuda's kernel, the same arithmetic, its sums in another order)."""
        st = self._state
        groups = st["groups"]
        n, n_groups = groups.n_rows, groups.n_groups
        static = self._static(xp, y)
        margin = xp.asarray(margin, dtype=xp.float32)
        ranked = _Ranked(xp, groups, margin)
        ys = y[ranked.order].astype(xp.float32)
        ss = margin[ranked.order]
        rnd = {**static, **self._per_round(xp, static, ranked, ys)}
        nonempty = ranked.count > 0
        last = xp.where(nonempty, ranked.start + ranked.count - 1, 0)
        first = xp.where(nonempty, ranked.start, 0)
        varied = (ss[first] != ss[last]) & nonempty  # XGBoost's best_score != worst_score

        grad = xp.zeros(n, dtype=xp.float64)
        hess = xp.zeros(n, dtype=xp.float64)
        sum_lambda = xp.zeros(n_groups, dtype=xp.float64)
        if xp is np:
            for a, b in self._pairs(xp, ranked, ys, groups, iteration):
                ya, yb = ys[a], ys[b]
                # One index of the pairs with different labels, gathered four times (a boolean mask
                # per array would count its entries four times, each a device sync on CuPy).
                keep = xp.flatnonzero(ya != yb)
                a, b, ya, yb = a[keep], b[keep], ya[keep], yb[keep]
                if a.shape[0] == 0:
                    continue
                hi = xp.where(ya > yb, a, b)
                lo = xp.where(ya > yb, b, a)
                g = ranked.group[hi]
                diff = ss[hi] - ss[lo]
                sigmoid = _sigmoid(xp, diff).astype(xp.float64)
                delta = xp.abs(self._delta(xp, rnd, ranked, ys, hi, lo, g))
                if self.score_normalization:
                    delta = xp.where(varied[g], delta / (xp.abs(diff).astype(xp.float64) + 0.01), delta)
                lam = ((sigmoid - 1.0) * delta).astype(xp.float32).astype(xp.float64)
                h = xp.maximum(sigmoid * (1.0 - sigmoid), 1e-16) * delta * 2.0
                h = h.astype(xp.float32).astype(xp.float64)
                grad += xp.bincount(hi, weights=lam, minlength=n)[:n] - xp.bincount(lo, weights=lam, minlength=n)[:n]
                hess += xp.bincount(hi, weights=h, minlength=n)[:n] + xp.bincount(lo, weights=h, minlength=n)[:n]
                sum_lambda += _segment_sum(xp, g, -2.0 * lam, n_groups)
        else:  # one kernel a round, every pair's arithmetic as the loop's, the pairs never materialised
            from . import ranking_cuda

            if self.pair_method == "topk":
                pairs = {"topk": self._topk_counts(xp, ranked)}
            else:
                sampled = self._sampled_pair_arrays(xp, ranked, ys, groups, iteration)
                pairs = {"sampled": sampled} if sampled is not None else None
            if pairs is not None:
                ranking_cuda.lambda_pairs(self.name, ys=ys, ss=ss, group=ranked.group, rank=ranked.rank,
                                          varied=varied, score_normalization=self.score_normalization, rnd=rnd,
                                          grad=grad, hess=hess, sum_lambda=sum_lambda, **pairs)
        return ranked, grad, hess, sum_lambda

    def _pairs(self, xp, ranked, ys, groups, iteration):
        """(a, b) arrays of ranked positions, chunk by chunk: the pairs XGBoost's MakePairs visits."""
        if self.pair_method == "topk":
            yield from self._topk_pairs(xp, ranked)
        else:
            yield from self._sampled_pairs(xp, ranked, ys, groups, iteration)

    def _topk_counts(self, xp, ranked):
        """(partners, ends): each position's pairs of the topk method, and their running sum (the pairs of
        position a are ends[a] - partners[a] .. ends[a] - 1)."""
        # Each of a query's first k positions pairs with every position below it.
        count = ranked.count[ranked.group]
        partners = xp.where(ranked.rank < self.num_pair, count - 1 - ranked.rank, 0)
        return partners, xp.cumsum(partners)

    def _topk_pairs(self, xp, ranked):
        partners, ends = self._topk_counts(xp, ranked)
        total = int(ends[-1]) if ends.shape[0] else 0
        for lo in range(0, total, PAIR_CHUNK):
            pair = xp.arange(lo, min(total, lo + PAIR_CHUNK), dtype=xp.int64)
            a = xp.searchsorted(ends, pair, side="right")
            b = a + 1 + (pair - (ends[a] - partners[a]))
            yield a, b

    def _sampled_pairs(self, xp, ranked, ys, groups, iteration):
        pairs = self._sampled_pair_arrays(xp, ranked, ys, groups, iteration)
        if pairs is None:
            return
        first, second = pairs
        for lo in range(0, first.shape[0], PAIR_CHUNK):
            yield first[lo:lo + PAIR_CHUNK], second[lo:lo + PAIR_CHUNK]

    def _sampled_pair_arrays(self, xp, ranked, ys, groups, iteration):
        """(first, second): every sampled pair's ranked positions (num_pair a document), or None for none."""
        # XGBoost's mean method (MakePairs): a query's documents ordered by label (descending, ties
        # in model order) form buckets of equal labels; bucket by bucket, num_pair times over the
        # bucket, each document pairs with one drawn uniformly from outside its bucket. The draws
        # replay XGBoost's random stream: query g of G, in round t, seeds its minstd_rand with
        # (t + 1) * G + g (as xgboost 3.2 does; its seed parameter plays no part), so the pairs are
        # XGBoost's. g and G are global (Groups.keys, Groups.n_total): a query draws the same pairs
        # on whichever worker holds it.
        _, _, keys = groups.device_arrays(xp)
        n = ys.shape[0]
        if n == 0:
            return None
        by_label = _Ranked(xp, groups, ys)  # label-sorted slots -> positions of the ranked list
        y_l = ys[by_label.order]
        new = xp.ones(n, dtype=bool)
        new[1:] = (y_l[1:] != y_l[:-1]) | (by_label.rank[1:] == 0)
        bucket_start = xp.flatnonzero(new)
        bucket_end = xp.concatenate([bucket_start[1:], xp.asarray([n], dtype=bucket_start.dtype)])
        bucket = xp.cumsum(new.astype(xp.int64)) - 1
        group = by_label.group
        b_lo = bucket_start[bucket] - by_label.start[group]  # the bucket's first slot, local to the query
        b_size = (bucket_end - bucket_start)[bucket]
        others = by_label.count[group] - b_size
        q = xp.flatnonzero(others > 0)
        if q.shape[0] == 0:
            return None
        group, b_lo, b_size, others = group[q], b_lo[q], b_size[q], others[q]
        in_bucket = by_label.rank[q] - b_lo
        seed = (xp.uint64(((iteration + 1) * groups.n_total) % (1 << 32)) + keys[group].astype(xp.uint64)) \
            % xp.uint64(1 << 32)
        state0 = seed % xp.uint64(_MINSTD_M)
        state0 = xp.where(state0 == 0, xp.uint64(1), state0)
        # Draw order within a query: buckets in label order, then the num_pair rounds, then the bucket's slots.
        s = xp.arange(self.num_pair, dtype=xp.int64)[:, None]
        draw = (self.num_pair * b_lo)[None, :] + s * b_size[None, :] + in_bucket[None, :]
        tile = (self.num_pair, 1)
        r = _minstd_uniform(xp, xp.tile(state0, tile).ravel(), draw.ravel(), xp.tile(others, tile).ravel(),
                            xp.tile(group, tile).ravel())
        r = r.reshape(self.num_pair, -1)
        r = xp.where(r >= b_lo[None, :], r + b_size[None, :], r)
        partner = by_label.start[group][None, :] + r
        first = xp.tile(by_label.order[q], tile).ravel()
        second = by_label.order[partner.ravel()]
        return first, second


class Pairwise(LambdaRank):
    """rank:pairwise: RankNet's loss, every pair weighted alike."""

    name = "rank:pairwise"


class NDCG(LambdaRank):
    """rank:ndcg: pairs weighted by the |change of NDCG| of swapping them."""

    name = "rank:ndcg"

    def check_labels(self, xp, y):
        check_ndcg_labels(xp, y, self.exp_gain, self.name)

    def _make_static(self, xp, groups, y):
        idcg = _idcg(xp, groups, y, self.topk, self.exp_gain)
        return {"inv_idcg": xp.where(idcg == 0.0, 0.0, 1.0 / xp.where(idcg == 0.0, 1.0, idcg))}

    def _per_round(self, xp, st, ranked, ys):
        # Gains and discounts of the current ranking, once per position rather than per pair.
        return {"gain": _gain(xp, ys, self.exp_gain), "discount": _discount(xp, ranked.rank)}

    def _delta(self, xp, st, ranked, ys, hi, lo, g):
        gain_hi, gain_lo = st["gain"][hi], st["gain"][lo]
        disc_hi, disc_lo = st["discount"][hi], st["discount"][lo]
        original = gain_hi * disc_hi + gain_lo * disc_lo
        changed = gain_lo * disc_hi + gain_hi * disc_lo
        return (original - changed) * st["inv_idcg"][g]


class MAP(LambdaRank):
    """rank:map: pairs weighted by the |change of average precision| of swapping them (binary labels)."""

    name = "rank:map"
    _metric_base = "map"

    def check_labels(self, xp, y):
        check_binary_labels(xp, y, self.name)

    def _per_round(self, xp, st, ranked, ys):
        # XGBoost's MAPStat in the current ranking: relevant documents up to each position, and the
        # running sum of label / position (as one global cumulative sum: differences within a group
        # are what DeltaMAP reads).
        y64 = ys.astype(xp.float64)
        total = xp.cumsum(y64)
        before = (total - y64)[ranked.start[ranked.group]]
        n_rel = total - before
        acc = xp.cumsum(y64 / (ranked.rank + 1).astype(xp.float64))
        last = ranked.start + ranked.count - 1
        n_total = n_rel[xp.where(ranked.count > 0, last, 0)]
        return {"n_rel": n_rel, "acc": acc, "n_total": n_total}

    def _delta(self, xp, st, ranked, ys, hi, lo, g):
        a, b = xp.minimum(hi, lo), xp.maximum(hi, lo)  # a is ranked above b
        y_a, y_b = ys[a], ys[b]
        r_a = (ranked.rank[a] + 1).astype(xp.float64)
        r_b = (ranked.rank[b] + 1).astype(xp.float64)
        m, nn = st["n_rel"][b], st["n_rel"][a]
        between = st["acc"][b - 1] - st["acc"][a]
        up = (m / r_b - (nn + 1.0) / r_a - between) / st["n_total"][g]
        down = (nn / r_a - m / r_b + between) / st["n_total"][g]
        return xp.where(y_a < y_b, up, down)


RANKING_OBJECTIVES = {cls.name: cls for cls in (Pairwise, NDCG, MAP)}


def make_objective(name: str, params) -> LambdaRank:
    cls = RANKING_OBJECTIVES[name]
    if params is None:
        return cls()
    return cls(pair_method=params.lambdarank_pair_method, num_pair_per_sample=params.lambdarank_num_pair_per_sample,
               normalization=params.lambdarank_normalization,
               score_normalization=params.lambdarank_score_normalization, ndcg_exp_gain=params.ndcg_exp_gain)


# --------------------------------------------------------------------------- metrics

_METRIC_RE = re.compile(r"^(ndcg|map|pre)(?:@(\d+))?(-)?$")


def parse_metric(name: str):
    """(kind, k or None, minus) for XGBoost's ranking metric names (ndcg, ndcg@k, ndcg@k-, ndcg-, map..., pre...),
    or None for other names. Raises ValueError for a ranking metric with k < 1."""
    m = _METRIC_RE.match(name) if isinstance(name, str) else None
    if m is None:
        return None
    k = None if m.group(2) is None else int(m.group(2))
    if k is not None and k < 1:
        raise ValueError(f"eval_metric {name!r}: the cut-off k must be >= 1")
    return m.group(1), k, m.group(3) is not None


def check_metric_labels(name: str, xp, y, exp_gain: bool) -> None:
    kind, _, _ = parse_metric(name)
    if kind == "ndcg":
        check_ndcg_labels(xp, y, exp_gain, f"eval_metric {name!r}")
    else:
        check_binary_labels(xp, y, f"eval_metric {name!r}")


def metric_sums(name: str, xp, y, pred, groups: Groups, exp_gain: bool = True, default_k: int | None = DEFAULT_METRIC_K):
    """(sum over groups of weight * value, sum of group weights) for a ranking metric, XGBoost's
    per-group definitions: documents ordered by prediction (descending, ties in row order);
    ndcg@k = DCG@k / ideal DCG@k (gain 2^label - 1, or label with exp_gain False); map@k = sum over
    the first k positions of precision-at-i for relevant documents, over min(relevant, k); pre@k =
    relevant documents among the first min(k, n), over min(k, n). A group with no relevant
    document scores 1 (0 for the names ending in '-'). A name without @k is cut at default_k
    (None: the whole list). The sums are xp scalars: on the device, nothing waits for them."""
    kind, k, minus = parse_metric(name)
    k = default_k if k is None else k
    n_groups = groups.n_groups
    if n_groups == 0:
        return 0.0, 0.0
    ranked = _Ranked(xp, groups, xp.asarray(pred, dtype=xp.float32))
    ys = y[ranked.order].astype(xp.float32)
    top = ranked.rank < (k if k is not None else np.iinfo(np.int64).max)
    cut = xp.minimum(ranked.count, k) if k is not None else ranked.count
    empty = 0.0 if minus else 1.0
    if kind == "ndcg":
        idcg = _idcg(xp, groups, y, k, exp_gain)
        dcg = _segment_sum(xp, ranked.group, xp.where(top, _gain(xp, ys, exp_gain) * _discount(xp, ranked.rank), 0.0),
                           n_groups)
        value = xp.where(idcg > 0.0, dcg / xp.where(idcg > 0.0, idcg, 1.0), empty)
    elif kind == "map":
        y64 = ys.astype(xp.float64)
        total = xp.cumsum(y64)
        hits = total - (total - y64)[ranked.start[ranked.group]]
        precision = xp.where(top, hits / (ranked.rank + 1).astype(xp.float64) * y64, 0.0)
        relevant = _segment_sum(xp, ranked.group, y64, n_groups)
        ap = _segment_sum(xp, ranked.group, precision, n_groups)
        denom = xp.minimum(relevant, float(k)) if k is not None else relevant
        value = xp.where(relevant > 0.0, ap / xp.where(relevant > 0.0, denom, 1.0), empty)
    else:  # pre
        hits = _segment_sum(xp, ranked.group, xp.where(top, ys.astype(xp.float64), 0.0), n_groups)
        value = xp.where(cut > 0, hits / xp.maximum(cut, 1).astype(xp.float64), 0.0)
    w = xp.ones(n_groups, dtype=xp.float64) if groups.weight is None else groups.to(xp).weight.astype(xp.float64)
    return (value * w).sum(), w.sum()
