"""Seed-shaped synthetic data sets for the benchmarks, made on the device (numpy or cupy) in the run.

Each imitates the shape and character of a set from the XGBoost GPU papers: Higgs
(physics, 28 features), Bosch (wide, 80% missing, rare positives), Covertype (7
imbalanced classes), YearPrediction (regression on 90 audio features), Airline (13
columns of flight data) and a Yahoo-LTR-like ranking set. Deterministic for a seed on
one device kind.
"""

from __future__ import annotations

import numpy as np

# Yahoo! LTR set 1: relevance grades 0-4 in these proportions; queries of 1-139 documents.
GRADE_SHARES = (0.26, 0.36, 0.28, 0.07, 0.03)
MAX_QUERY_SIZE = 139


def make_higgs(xp, n_rows: int, seed: int):
    """(X float32 (n, 28), y float32 (n,)) on xp's device, deterministic for a seed."""
    rs = xp.random.RandomState(seed)
    low = rs.standard_normal((n_rows, 21)).astype(xp.float32)
    low[:, 0::3] = xp.abs(low[:, 0::3]) ** 1.5  # momentum-like, skewed
    high = xp.stack(
        [
            xp.sqrt(low[:, 0] ** 2 + low[:, 3] ** 2),
            low[:, 1] * low[:, 4],
            xp.tanh(low[:, 2] - low[:, 5]),
            xp.log1p(xp.abs(low[:, 6] * low[:, 9])),
            low[:, 7] ** 2 - low[:, 10],
            xp.sin(low[:, 8]) * low[:, 11],
            xp.abs(low[:, 12] + low[:, 15]) ** 0.5,
        ],
        axis=1,
    ).astype(xp.float32)
    X = xp.concatenate([low, high], axis=1)
    score = 0.8 * high[:, 0] - 0.6 * high[:, 1] + high[:, 2] - 0.5 * high[:, 4] + 0.7 * high[:, 5] - low[:, 13]
    score = score - score.mean()
    p = 1.0 / (1.0 + xp.exp(-score))
    y = (rs.random_sample(n_rows) < p).astype(xp.float32)
    return xp.ascontiguousarray(X), y


def make_covertype(xp, n_rows: int, seed: int):
    """(X float32 (n, 54), y float32 (n,) in 0..6) on xp's device, deterministic for a seed."""
    rs = xp.random.RandomState(seed)
    elevation = rs.normal(2960, 280, n_rows)
    aspect = rs.uniform(0, 360, n_rows)
    slope = xp.abs(rs.normal(14, 7.5, n_rows))
    h_hydro = xp.abs(rs.normal(270, 210, n_rows))
    v_hydro = rs.normal(46, 58, n_rows)
    h_road = xp.abs(rs.normal(2350, 1560, n_rows))
    shade9 = xp.clip(rs.normal(212, 27, n_rows) - 0.3 * (aspect - 180) / 6, 0, 254)
    shade12 = xp.clip(rs.normal(223, 20, n_rows) - slope, 0, 254)
    shade3 = xp.clip(rs.normal(142, 38, n_rows) + 0.3 * (aspect - 180) / 6, 0, 254)
    h_fire = xp.abs(rs.normal(1980, 1320, n_rows))
    wild = xp.clip(((elevation - 2400) / 350 + rs.normal(0, 0.8, n_rows)).astype(xp.int64), 0, 3)
    soil = xp.clip(((elevation - 1900) / 55 + rs.normal(0, 4, n_rows)).astype(xp.int64), 0, 39)
    cont = xp.stack([elevation, aspect, slope, h_hydro, v_hydro, h_road, shade9, shade12, shade3, h_fire], axis=1)
    onehot = xp.zeros((n_rows, 44), dtype=xp.float32)
    rows = xp.arange(n_rows)
    onehot[rows, wild] = 1.0
    onehot[rows, 4 + soil] = 1.0
    X = xp.concatenate([xp.round(cont).astype(xp.float32), onehot], axis=1)
    # Class scores: elevation bands dominate, the rest shift the boundaries.
    z = (elevation - 2960) / 280
    road = h_road / 1560
    fire = h_fire / 1320
    hydro = h_hydro / 210
    score = xp.stack([
        1.6 - 1.0 * (z - 0.6) ** 2 + 0.3 * road,                  # spruce/fir: high
        2.0 - 1.1 * z ** 2 + 0.2 * fire,                           # lodgepole pine: middle, the largest
        0.3 - 1.5 * (z + 1.6) ** 2 + 0.4 * (wild == 3),            # ponderosa pine: low
        -0.9 - 2.0 * (z + 2.2) ** 2 + 0.8 * (wild == 3) - 0.3 * hydro,  # cottonwood/willow: lowest, rare
        0.4 - 2.0 * (z + 0.4) ** 2 - 0.4 * road + 0.1 * slope / 7.5,  # aspen
        -0.2 - 1.6 * (z + 1.3) ** 2 + 0.3 * (soil < 8),            # douglas-fir
        0.2 - 1.2 * (z - 1.5) ** 2 + 0.2 * (wild == 2),           # krummholz: highest
    ], axis=1)
    g = -xp.log(-xp.log(rs.uniform(1e-12, 1.0, (n_rows, 7))))  # Gumbel noise: a softmax draw
    y = xp.argmax(score * 2.0 + g, axis=1).astype(xp.float32)
    return xp.ascontiguousarray(X), y


def make_ltr(xp, n_queries: int, n_features: int, mean_docs: float, seed: int):
    """(X float32 (n, F), y float32 (n,), qid int64 (n,)) on xp's device, deterministic for a seed."""
    rs = xp.random.RandomState(seed)
    sizes = xp.clip(1 + rs.poisson(mean_docs - 1, n_queries), 1, MAX_QUERY_SIZE).astype(xp.int64)
    n = int(sizes.sum())
    ends = xp.cumsum(sizes)
    qid = xp.searchsorted(ends, xp.arange(n, dtype=xp.int64), side="right").astype(xp.int64)
    X = rs.random_sample((n, n_features)).astype(xp.float32)
    X = xp.round(X ** 2 * 64) / 64  # skewed, coarse values: most features bin exactly
    X[rs.random_sample((n, n_features)) < 0.4] = 0.0
    informative = min(20, n_features)
    w = rs.standard_normal(informative).astype(xp.float32)
    query_shift = rs.standard_normal(n_queries).astype(xp.float32)[qid]
    score = X[:, :informative] @ w + 0.5 * xp.sin(6 * X[:, 0] * X[:, 1]) + 0.5 * query_shift
    score = score + 1.5 * rs.standard_normal(n).astype(xp.float32)
    cut = xp.asarray(np.cumsum(GRADE_SHARES)[:-1])
    thresholds = xp.quantile(score, cut)
    y = xp.searchsorted(thresholds, score).astype(xp.float32)
    return xp.ascontiguousarray(X), y, qid


def make_bosch(xp, n_rows: int, seed: int, n_features: int = 968):
    """(X float32 (n, 968) with ~80% NaN, y float32 (n,) with ~0.6% positives).

    Bosch's production-line measurements: each part passes some stations only, so
    whole blocks of features are missing together; failures are rare and depend on
    a few measurements of the stations a part went through.
    """
    rs = xp.random.RandomState(seed)
    n_stations = 52
    per = n_features // n_stations + 1
    station = xp.arange(n_features) // per
    # Each part visits ~20% of the stations: missing in blocks, about 80% overall.
    visits = rs.random_sample((n_rows, n_stations)) < 0.2
    X = rs.standard_normal((n_rows, n_features)).astype(xp.float32)
    X = xp.round(X * 32) / 32  # measurements are recorded to a few digits
    X = xp.where(visits[:, station], X, xp.float32(xp.nan))  # not mask assignment: > 2**31 entries
    Z = xp.nan_to_num(X)
    score = 1.2 * Z[:, 3] - 0.9 * Z[:, 17] * Z[:, 18] + 0.8 * xp.abs(Z[:, 200]) + 0.6 * Z[:, 611] \
        + 0.7 * visits[:, 30] - 6.2
    y = (rs.random_sample(n_rows) < 1.0 / (1.0 + xp.exp(-score))).astype(xp.float32)
    return xp.ascontiguousarray(X), y


def make_year(xp, n_rows: int, seed: int):
    """(X float32 (n, 90), y float32 (n,)): YearPrediction's 12 timbre averages and 78 covariances,
    the target a year in 1922..2011 skewed toward recent years."""
    rs = xp.random.RandomState(seed)
    latent = rs.standard_normal((n_rows, 6)).astype(xp.float32)
    mix = rs.standard_normal((6, 90)).astype(xp.float32)
    X = latent @ mix + 0.7 * rs.standard_normal((n_rows, 90)).astype(xp.float32)
    X[:, 12:] = X[:, 12:] * xp.abs(X[:, :1])  # covariances scale with loudness
    era = 1.3 * latent[:, 0] - 0.6 * latent[:, 1] * latent[:, 2] + 0.4 * xp.tanh(latent[:, 3])
    year = 1998.0 + 10.0 * xp.tanh(era / 2.0) + 3.0 * rs.standard_normal(n_rows)
    return xp.ascontiguousarray(X.astype(xp.float32)), xp.clip(xp.round(year), 1922, 2011).astype(xp.float32)


def make_airline(xp, n_rows: int, seed: int):
    """(X float32 (n, 13), y float32 (n,)): the Airline delay set's columns (month, day of month,
    day of week, departure / arrival times, carrier, flight number, tail number, elapsed time,
    origin, destination, distance, taxi time) as numbers; y = arrival delayed (~20%)."""
    rs = xp.random.RandomState(seed)
    month = rs.randint(1, 13, n_rows)
    dom = rs.randint(1, 32, n_rows)
    dow = rs.randint(1, 8, n_rows)
    dep = rs.randint(0, 2400, n_rows)
    elapsed = xp.clip(rs.gamma(4.0, 35.0, n_rows), 20, 700)
    arr = (dep + (elapsed * 100 / 60).astype(xp.int64)) % 2400
    carrier = rs.randint(0, 29, n_rows)
    flight = rs.randint(1, 8000, n_rows)
    tail = rs.randint(0, 13000, n_rows)
    origin = rs.randint(0, 350, n_rows)
    dest = rs.randint(0, 350, n_rows)
    distance = elapsed * 7.5 + rs.normal(0, 40, n_rows)
    taxi = xp.clip(rs.gamma(2.0, 7.0, n_rows), 1, 120)
    cols = [month, dom, dow, dep, arr, carrier, flight, tail, elapsed, origin, dest, distance, taxi]
    X = xp.stack([c.astype(xp.float32) for c in cols], axis=1)
    hub = (origin % 17 == 0).astype(xp.float32)
    score = (0.9 * (dep > 1500) + 0.5 * xp.isin(month, xp.asarray([6, 7, 12])) + 0.04 * (taxi - 14)
             + 0.6 * hub + 0.3 * (carrier % 5 == 0) - 0.2 * (dow == 6) - 1.9)
    y = (rs.random_sample(n_rows) < 1.0 / (1.0 + xp.exp(-score))).astype(xp.float32)
    return xp.ascontiguousarray(X), y
