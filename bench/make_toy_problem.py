#!/usr/bin/env python3
"""Write a synthetic IPF (raking) problem in the `privforge bench ipf --export` layout.

Usage: python bench/make_toy_problem.py DIR [--n 100000] [--seed 20240611]
                                            [--tolerance 0.001] [--max-sweeps 500]

Layout written:
    DIR/candidates.csv           one column per categorical field, one row per candidate
    DIR/margins/<name>.csv       the margin's fields followed by `share`; one row per cell
    DIR/problem.json             {"tolerance": ..., "max_sweeps": ...}

How the problem is built (deterministic for a given --n and --seed):

* Six categorical fields. Candidates are drawn from a dependent generative model with
  structural zeros (children are never employed and never beyond primary education), so
  several cross-classified cells have no candidates at all. One country has only a
  dozen candidates, so some of its cells hold a single candidate.
* A hidden "true" weight is drawn for every candidate (log-linear in the fields plus
  per-record noise). Candidates in a few chosen cells get true weight 0, which produces
  target cells of share 0 that still contain candidates.
* Every margin is the weighted share table of those true weights, so all margins are
  mutually consistent and the problem is feasible (the true weights solve it).
* Margin files list the full Cartesian product of the levels of their fields, including
  one country with neither candidates nor share, so zero cells with and without
  candidates both occur.

Only the Python standard library and numpy are needed.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import sys

import numpy as np

COUNTRIES = ["DE", "FR", "IT", "ES", "PL", "NL", "BE", "SE", "AT", "PT", "MT"]
TINY_COUNTRY, TINY_COUNT = "MT", 12   # so small that some of its cells hold one candidate
EMPTY_COUNTRY = "LU"  # listed in the margins with share 0, never drawn
AGE_GROUPS = ["00-14", "15-24", "25-34", "35-44", "45-54", "55-64", "65-74", "75+"]
SEXES = ["F", "M"]
EDUCATION = ["none", "primary", "secondary", "tertiary", "doctorate"]
EMPLOYMENT = ["employed", "unemployed", "inactive", "student"]
HOUSEHOLD = ["1", "2", "3", "4", "5+"]

LEVELS = {
    "current_country": COUNTRIES + [EMPTY_COUNTRY],
    "age_group": AGE_GROUPS,
    "sex": SEXES,
    "education_level": EDUCATION,
    "employment_status": EMPLOYMENT,
    "household_size": HOUSEHOLD,
}
FIELDS = list(LEVELS)

MARGINS = {
    "country": ["current_country"],
    "age": ["age_group"],
    "sex": ["sex"],
    "education": ["education_level"],
    "employment": ["employment_status"],
    "household": ["household_size"],
    "country_age": ["current_country", "age_group"],
    "age_sex": ["age_group", "sex"],
    "age_education": ["age_group", "education_level"],
    "age_employment": ["age_group", "employment_status"],
    "education_employment": ["education_level", "employment_status"],
    "country_sex_age": ["current_country", "sex", "age_group"],
}


def draw_categorical(rng: np.random.Generator, probs: np.ndarray) -> np.ndarray:
    """Draw one category index per row of `probs` (rows are probability vectors)."""
    cum = np.cumsum(probs, axis=1)
    cum[:, -1] = 1.0
    u = rng.random(probs.shape[0])[:, None]
    return (u > cum).sum(axis=1)


def make_candidates(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """Return level indices per field for n candidates (never uses EMPTY_COUNTRY)."""
    n_c, n_a, n_e, n_m, n_h = (len(COUNTRIES), len(AGE_GROUPS), len(EDUCATION),
                               len(EMPLOYMENT), len(HOUSEHOLD))

    country = rng.choice(n_c - 1, size=n, p=rng.dirichlet(np.full(n_c - 1, 2.0)))
    country[rng.choice(n, size=TINY_COUNT, replace=False)] = COUNTRIES.index(TINY_COUNTRY)

    age_by_country = rng.dirichlet(np.full(n_a, 4.0), size=n_c)
    age = draw_categorical(rng, age_by_country[country])

    sex = (rng.random(n) < 0.49 + 0.02 * (age >= 6)).astype(int)

    edu_by_age = rng.dirichlet(np.full(n_e, 1.5), size=n_a)
    edu_by_age[0] = [0.6, 0.4, 0.0, 0.0, 0.0]  # children: none / primary only
    edu_by_age[1, 4] = 0.0                     # nobody aged 15-24 has a doctorate
    edu_by_age /= edu_by_age.sum(axis=1, keepdims=True)
    edu = draw_categorical(rng, edu_by_age[age])

    emp_by_age_edu = rng.dirichlet(np.full(n_m, 1.5), size=(n_a, n_e))
    emp_by_age_edu[0, :, :] = [0.0, 0.0, 0.7, 0.3]  # children: inactive / student
    emp_by_age_edu /= emp_by_age_edu.sum(axis=2, keepdims=True)
    emp = draw_categorical(rng, emp_by_age_edu[age, edu])

    hh_by_age = rng.dirichlet(np.full(n_h, 2.0), size=n_a)
    hh = draw_categorical(rng, hh_by_age[age])

    # A handful of 15-24 year-old doctorate holders after all: they exist among the
    # candidates, but the target below gives their cell share 0.
    few = rng.choice(np.flatnonzero(age == 1), size=min(25, int((age == 1).sum())),
                     replace=False)
    edu[few] = 4

    return {
        "current_country": country,
        "age_group": age,
        "sex": sex,
        "education_level": edu,
        "employment_status": emp,
        "household_size": hh,
    }


def make_true_weights(rng: np.random.Generator, idx: dict[str, np.ndarray]) -> np.ndarray:
    """Positive log-linear weights with interactions and noise, plus structural zeros."""
    n = len(idx["sex"])
    log_w = np.zeros(n)
    for field in FIELDS:
        log_w += rng.normal(0.0, 0.35, size=len(LEVELS[field]))[idx[field]]
    inter = rng.normal(0.0, 0.25, size=(len(LEVELS["current_country"]), len(SEXES),
                                        len(AGE_GROUPS)))
    log_w += inter[idx["current_country"], idx["sex"], idx["age_group"]]
    inter2 = rng.normal(0.0, 0.25, size=(len(EDUCATION), len(EMPLOYMENT)))
    log_w += inter2[idx["education_level"], idx["employment_status"]]
    log_w += rng.normal(0.0, 0.2, size=n)
    w = np.exp(log_w)

    # Target-zero cells that do contain candidates.
    w[(idx["age_group"] == 1) & (idx["education_level"] == 4)] = 0.0
    w[(idx["current_country"] == COUNTRIES.index("PT")) & (idx["sex"] == 1)
      & (idx["age_group"] == AGE_GROUPS.index("75+"))] = 0.0
    return w


def margin_table(idx: dict[str, np.ndarray], w: np.ndarray, fields: list[str]):
    """Yield (cell labels, share) over the full Cartesian product of the fields' levels."""
    shape = tuple(len(LEVELS[f]) for f in fields)
    flat = np.ravel_multi_index(tuple(idx[f] for f in fields), shape)
    totals = np.bincount(flat, weights=w, minlength=int(np.prod(shape)))
    shares = totals / totals.sum()
    for cell in itertools.product(*(range(s) for s in shape)):
        labels = [LEVELS[f][i] for f, i in zip(fields, cell)]
        yield labels, shares[np.ravel_multi_index(cell, shape)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", help="output directory (created if missing)")
    ap.add_argument("--n", type=int, default=100_000, help="number of candidates")
    ap.add_argument("--seed", type=int, default=20240611)
    ap.add_argument("--tolerance", type=float, default=0.001)
    ap.add_argument("--max-sweeps", type=int, default=500)
    args = ap.parse_args(argv)
    if args.n < 1000:
        ap.error("--n must be at least 1000")

    rng = np.random.default_rng(args.seed)
    idx = make_candidates(rng, args.n)
    w = make_true_weights(rng, idx)

    os.makedirs(os.path.join(args.dir, "margins"), exist_ok=True)
    for stale in os.listdir(os.path.join(args.dir, "margins")):
        if stale.endswith(".csv"):
            os.remove(os.path.join(args.dir, "margins", stale))

    with open(os.path.join(args.dir, "candidates.csv"), "w", newline="") as fh:
        out = csv.writer(fh, lineterminator="\n")
        out.writerow(FIELDS)
        columns = [np.asarray(LEVELS[f], dtype=object)[idx[f]] for f in FIELDS]
        out.writerows(zip(*columns))

    zero_cells = 0
    for name, fields in MARGINS.items():
        with open(os.path.join(args.dir, "margins", f"{name}.csv"), "w", newline="") as fh:
            out = csv.writer(fh, lineterminator="\n")
            out.writerow(fields + ["share"])
            for labels, share in margin_table(idx, w, fields):
                zero_cells += share == 0.0
                out.writerow(labels + [repr(float(share))])

    with open(os.path.join(args.dir, "problem.json"), "w") as fh:
        json.dump({"tolerance": args.tolerance, "max_sweeps": args.max_sweeps}, fh)
        fh.write("\n")

    print(f"wrote {args.dir}: {args.n} candidates, {len(MARGINS)} margins, "
          f"{zero_cells} zero-share cells", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
