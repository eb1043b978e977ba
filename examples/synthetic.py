"""Seed-shaped synthetic data sets for the benchmarks, made on the device (numpy or cupy) in the run.

Each imitates the shape and character of a set from the XGBoost GPU papers: Bosch
(wide, 80% missing, rare positives) and YearPrediction (regression on 90 audio
features) here; Higgs, Covertype and a Yahoo-LTR-like ranking set live with their
own benchmarks (benchmark_higgs.py, benchmark_covertype.py, benchmark_ltr.py); Airline
(13 columns of flight data) here. Deterministic for a seed on one device kind.
"""

from __future__ import annotations


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
