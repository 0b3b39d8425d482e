//! Stage 2: capacity checks with targeted backfill, then iterative proportional fitting
//! (raking) of candidate weights to every margin.

use crate::margins::MarginSet;
use crate::profile::Person;
use anyhow::{bail, Result};
use ndarray::Array1;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const STAGE: &str = "calibration";
/// Marks a candidate whose combination a margin does not list (target share 0).
pub const UNLISTED: u32 = u32::MAX;

/// A margin reduced to what IPF needs: each candidate's cell and the target shares.
#[derive(Debug, Clone)]
pub struct EncodedMargin {
    pub name: String,
    pub cell: Vec<u32>,
    pub target: Array1<f64>,
}

pub fn encode(ms: &MarginSet, pool: &[Person]) -> Vec<EncodedMargin> {
    ms.margins
        .iter()
        .map(|m| EncodedMargin {
            name: m.name.clone(),
            cell: pool
                .iter()
                .map(|p| m.cell_of_person(p).map(|c| c as u32).unwrap_or(UNLISTED))
                .collect(),
            target: Array1::from(m.shares.clone()),
        })
        .collect()
}

/// Weighted mass per cell, plus the mass on unlisted combinations.
pub fn cell_mass(m: &EncodedMargin, w: &[f64]) -> (Vec<f64>, f64) {
    let mut mass = vec![0.0; m.target.len()];
    let mut unlisted = 0.0;
    for (&c, &wi) in m.cell.iter().zip(w) {
        if c == UNLISTED {
            unlisted += wi;
        } else {
            mass[c as usize] += wi;
        }
    }
    (mass, unlisted)
}

/// L1 distance between the normalised mass and the targets, in cell order; mass on
/// unlisted combinations counts in full (its target is 0). Used for pool and sample alike.
pub fn l1_of(target: &[f64], mass: &[f64], unlisted: f64) -> f64 {
    let total: f64 = mass.iter().sum::<f64>() + unlisted;
    if total <= 0.0 {
        return target.iter().sum();
    }
    let mut s = 0.0;
    for (t, m) in target.iter().zip(mass) {
        s += (m / total - t).abs();
    }
    s + unlisted / total
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Deficit {
    pub margin: String,
    pub cell: Vec<String>,
    pub target: f64,
    pub required: usize,
    pub available: usize,
}

/// Cells whose candidates cannot carry ceil(N * target) profiles.
pub fn capacity_deficits(
    ms: &MarginSet,
    pool: &[Person],
    n: usize,
) -> Vec<(usize, usize, Deficit)> {
    let mut out = Vec::new();
    for (mi, m) in ms.margins.iter().enumerate() {
        let mut count = vec![0usize; m.cells.len()];
        for p in pool {
            if let Some(c) = m.cell_of_person(p) {
                count[c] += 1;
            }
        }
        for (c, &t) in m.shares.iter().enumerate() {
            if t <= 0.0 {
                continue;
            }
            let required = ((n as f64) * t - 1e-12).ceil().max(1.0) as usize;
            if count[c] < required {
                out.push((
                    mi,
                    c,
                    Deficit {
                        margin: m.name.clone(),
                        cell: m.cells[c].clone(),
                        target: t,
                        required,
                        available: count[c],
                    },
                ));
            }
        }
    }
    out
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IpfReport {
    pub converged: bool,
    pub sweeps: usize,
    pub tolerance: f64,
    pub per_sweep_max_l1: Vec<f64>,
    pub final_l1: BTreeMap<String, f64>,
    pub max_l1: f64,
    pub weight_min_positive: f64,
    pub weight_max: f64,
    pub zero_weight_candidates: usize,
    /// (sum w)^2 / sum w^2.
    pub effective_sample_size: f64,
    /// N * max(w) / sum(w): above 1 a without-replacement draw cannot be proportional to w.
    pub max_ideal_inclusion_probability: f64,
}

pub struct Fit {
    pub weights: Vec<f64>,
    pub report: IpfReport,
}

/// Raking: each sweep scales the weights of every margin's cells to their targets, keeping
/// the total weight fixed. Stops at max-L1 <= tolerance; fails if it cannot get there.
pub fn ipf(
    margins: &[EncodedMargin],
    n_sample: usize,
    tolerance: f64,
    max_sweeps: usize,
) -> Result<Fit> {
    let n = margins.first().map(|m| m.cell.len()).unwrap_or(0);
    if n == 0 {
        bail!("IPF needs at least one margin and one candidate");
    }
    let mut w = vec![1.0f64; n];
    let total = n as f64;
    let mut history = Vec::new();
    let mut converged = false;
    let mut factors: Vec<f64> = Vec::new();
    let l1s = |w: &[f64]| -> Vec<f64> {
        margins
            .iter()
            .map(|m| {
                let (mass, un) = cell_mass(m, w);
                l1_of(m.target.as_slice().unwrap(), &mass, un)
            })
            .collect()
    };
    for _sweep in 0..max_sweeps {
        for m in margins {
            let (mass, _) = cell_mass(m, &w);
            factors.clear();
            factors.extend(mass.iter().zip(m.target.iter()).map(|(&s, &t)| {
                if s > 0.0 {
                    t * total / s
                } else {
                    0.0
                }
            }));
            for (wi, &c) in w.iter_mut().zip(&m.cell) {
                *wi *= if c == UNLISTED {
                    0.0
                } else {
                    factors[c as usize]
                };
            }
        }
        let max = l1s(&w).into_iter().fold(0.0, f64::max);
        history.push(max);
        if max <= tolerance {
            converged = true;
            break;
        }
    }
    let finals = l1s(&w);
    let final_l1: BTreeMap<String, f64> = margins
        .iter()
        .map(|m| m.name.clone())
        .zip(finals.iter().copied())
        .collect();
    let max_l1 = finals.iter().copied().fold(0.0, f64::max);
    if !converged {
        let (worst, wl1) = final_l1
            .iter()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(k, v)| (k.clone(), *v))
            .unwrap();
        bail!(
            "IPF did not converge within {max_sweeps} sweeps: max L1 {max_l1:.6} > tolerance {tolerance}; worst margin {worst} (L1 {wl1:.6}). The margins may be inconsistent or the candidate pool may not cover them."
        );
    }
    let sum: f64 = w.iter().sum();
    let sum2: f64 = w.iter().map(|x| x * x).sum();
    let wmax = w.iter().copied().fold(0.0, f64::max);
    let report = IpfReport {
        converged,
        sweeps: history.len(),
        tolerance,
        per_sweep_max_l1: history,
        final_l1,
        max_l1,
        weight_min_positive: w
            .iter()
            .copied()
            .filter(|&x| x > 0.0)
            .fold(f64::INFINITY, f64::min),
        weight_max: wmax,
        zero_weight_candidates: w.iter().filter(|&&x| x == 0.0).count(),
        effective_sample_size: sum * sum / sum2,
        max_ideal_inclusion_probability: n_sample as f64 * wmax / sum,
    };
    Ok(Fit { weights: w, report })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn margin(name: &str, cell: Vec<u32>, target: Vec<f64>) -> EncodedMargin {
        EncodedMargin {
            name: name.into(),
            cell,
            target: Array1::from(target),
        }
    }

    #[test]
    fn rakes_two_margins_to_their_targets() {
        // Four candidates on a 2x2 table; rows want 0.3/0.7, columns 0.6/0.4.
        let rows = margin("rows", vec![0, 0, 1, 1], vec![0.3, 0.7]);
        let cols = margin("cols", vec![0, 1, 0, 1], vec![0.6, 0.4]);
        let fit = ipf(&[rows.clone(), cols.clone()], 2, 1e-9, 100).unwrap();
        for m in [&rows, &cols] {
            let (mass, un) = cell_mass(m, &fit.weights);
            assert!(l1_of(m.target.as_slice().unwrap(), &mass, un) < 1e-9);
        }
        // Independence is the maximum-entropy solution for these margins.
        let s: f64 = fit.weights.iter().sum();
        assert!((fit.weights[0] / s - 0.18).abs() < 1e-9);
    }

    #[test]
    fn inconsistent_margins_fail_naming_the_worst_margin() {
        let a = margin("a", vec![0, 1], vec![0.5, 0.5]);
        let b = margin("b", vec![0, 1], vec![0.9, 0.1]);
        let err = ipf(&[a, b], 1, 1e-3, 50).err().unwrap().to_string();
        assert!(err.contains("did not converge"), "{err}");
        assert!(err.contains("worst margin"), "{err}");
    }

    #[test]
    fn unlisted_combinations_get_zero_weight() {
        let a = margin("a", vec![0, UNLISTED, 0], vec![1.0]);
        let fit = ipf(&[a], 1, 1e-9, 10).unwrap();
        assert_eq!(fit.weights[1], 0.0);
        assert_eq!(fit.report.zero_weight_candidates, 1);
    }
}
