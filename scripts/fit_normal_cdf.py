#!/usr/bin/env python3
"""Fits the polynomials of runtime/lib/VectorizableMath.h's normal CDF.

Least squares on Chebyshev nodes, in float64 against mpmath at 30 digits:
  P: erf(u) / u as a polynomial of degree 6 in u^2 on [0, 1];
  R: erfc(u) e^(u^2) as a polynomial of degree 10 in 1 / u on [1, 10].
Prints the coefficients (lowest degree first) and the fits' largest relative
errors. Run with Debian's python3 (numpy, mpmath):
  /usr/bin/python3 scripts/fit_normal_cdf.py
"""
import numpy as np
from mpmath import erf, erfc, exp, mp, mpf

mp.dps = 30
NODES = 3000


def chebyshev_nodes(lo, hi, n):
    k = np.arange(n)
    return (lo + hi) / 2 + (hi - lo) / 2 * np.cos((2 * k + 1) * np.pi / (2 * n))


def fit(variable, target, degree):
    vander = np.vander(variable, degree + 1, increasing=True)
    coeffs, *_ = np.linalg.lstsq(vander, target, rcond=None)
    return coeffs, np.max(np.abs(vander @ coeffs - target) / np.abs(target))


u = chebyshev_nodes(0.0, 1.0, NODES)
p, p_err = fit(u**2, np.array([float(erf(mpf(v)) / mpf(v)) for v in u]), 6)
u = chebyshev_nodes(1.0, 10.0, NODES)
r, r_err = fit(1 / u, np.array([float(erfc(mpf(v)) * exp(mpf(v) ** 2)) for v in u]), 10)
print("P (erf(u)/u in u^2, relative error %.2g):" % p_err)
print("  " + ", ".join("%.9ef" % c for c in p))
print("R (erfc(u) e^(u^2) in 1/u, relative error %.2g):" % r_err)
print("  " + ", ".join("%.9ef" % c for c in r))
