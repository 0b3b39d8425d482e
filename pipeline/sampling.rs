//! Stage 3: choose N profiles without replacement in proportion to the IPF weights.
//!
//! 1. `trials` independent Efraimidis–Spirakis draws (key ln(u)/w, keep the N largest); the
//!    draw with the lowest total L1 over all margins is kept, as in PrivacyTrace.
//! 2. A swap refinement then integerises it: a selected profile is swapped for a candidate
//!    drawn in proportion to weight whenever that lowers the total L1, which drives every
//!    margin of the N-profile sample toward its rounding floor while only ever bringing in
//!    weight-proportional draws.
//!
//! A plain single weighted draw with its own stream is reported next to it for comparison.

use crate::calibration::{l1_of, EncodedMargin, UNLISTED};
use crate::seeding::rng;
use anyhow::{bail, Result};
use rand::Rng;
use rand_distr::weighted::WeightedAliasIndex;
use rand_distr::Distribution;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

pub const STAGE: &str = "sampling";

/// One Efraimidis–Spirakis draw of `n` indices with positive weight.
pub fn es_draw(weights: &[f64], n: usize, seed: u64, key: &str) -> Result<Vec<usize>> {
    let mut r = rng(seed, STAGE, key);
    let mut keyed: Vec<(f64, usize)> = Vec::with_capacity(weights.len());
    for (i, &w) in weights.iter().enumerate() {
        let u: f64 = r.random();
        if w > 0.0 {
            // u in [0, 1): map to (0, 1] so ln is finite.
            keyed.push(((1.0 - u).ln() / w, i));
        }
    }
    if keyed.len() < n {
        bail!(
            "only {} candidates have positive weight, {n} needed",
            keyed.len()
        );
    }
    keyed.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut sel: Vec<usize> = keyed[..n].iter().map(|k| k.1).collect();
    sel.sort_unstable();
    Ok(sel)
}

/// Counts of a selection in every cell of every margin (last slot: unlisted).
fn counts(margins: &[EncodedMargin], sel: &[usize]) -> Vec<Vec<i64>> {
    margins
        .iter()
        .map(|m| {
            let mut c = vec![0i64; m.target.len() + 1];
            for &i in sel {
                let k = m.cell[i];
                let slot = if k == UNLISTED {
                    m.target.len()
                } else {
                    k as usize
                };
                c[slot] += 1;
            }
            c
        })
        .collect()
}

/// L1 of a selection against each margin, computed exactly as the verifier recomputes it
/// from `profiles.jsonl`.
pub fn sample_l1(margins: &[EncodedMargin], sel: &[usize]) -> Vec<f64> {
    counts(margins, sel)
        .iter()
        .zip(margins)
        .map(|(c, m)| {
            let k = m.target.len();
            let mass: Vec<f64> = c[..k].iter().map(|&x| x as f64).collect();
            l1_of(m.target.as_slice().unwrap(), &mass, c[k] as f64)
        })
        .collect()
}

/// The smallest L1 any sample of size n can reach: largest-remainder rounding of n * target.
pub fn floor_l1(target: &[f64], n: usize) -> f64 {
    let nf = n as f64;
    let mut base: Vec<i64> = target.iter().map(|t| (t * nf).floor() as i64).collect();
    let mut rest = n as i64 - base.iter().sum::<i64>();
    let mut order: Vec<usize> = (0..target.len()).collect();
    order.sort_by(|&a, &b| {
        let ra = target[a] * nf - base[a] as f64;
        let rb = target[b] * nf - base[b] as f64;
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    for &i in &order {
        if rest <= 0 {
            break;
        }
        base[i] += 1;
        rest -= 1;
    }
    let mass: Vec<f64> = base.iter().map(|&x| x as f64).collect();
    l1_of(target, &mass, 0.0)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SamplingReport {
    pub n: usize,
    pub trials: usize,
    pub best_trial: usize,
    pub swap_iterations: usize,
    pub swaps_accepted: usize,
    pub sample_l1: BTreeMap<String, f64>,
    pub plain_draw_l1: BTreeMap<String, f64>,
    pub best_trial_l1: BTreeMap<String, f64>,
    pub floor_l1: BTreeMap<String, f64>,
    pub sample_total_l1: f64,
    pub plain_draw_total_l1: f64,
    pub best_trial_total_l1: f64,
    pub floor_total_l1: f64,
}

pub struct Selection {
    /// Selected candidate indices, ascending.
    pub selected: Vec<usize>,
    pub report: SamplingReport,
}

pub fn select(
    margins: &[EncodedMargin],
    weights: &[f64],
    n: usize,
    seed: u64,
    trials: usize,
    swap_iterations: usize,
) -> Result<Selection> {
    let names: Vec<String> = margins.iter().map(|m| m.name.clone()).collect();
    let as_map = |v: &[f64]| -> BTreeMap<String, f64> {
        names.iter().cloned().zip(v.iter().copied()).collect()
    };
    let total = |v: &[f64]| -> f64 { v.iter().sum() };

    let plain = es_draw(weights, n, seed, "plain")?;
    let plain_l1 = sample_l1(margins, &plain);

    let mut best: Option<(f64, usize, Vec<usize>)> = None;
    for t in 0..trials {
        let sel = es_draw(weights, n, seed, &format!("trial/{t}"))?;
        let tl = total(&sample_l1(margins, &sel));
        if best.as_ref().is_none_or(|b| tl < b.0) {
            best = Some((tl, t, sel));
        }
    }
    let (_, best_trial, best_sel) = best.expect("trials >= 1");
    let best_l1 = sample_l1(margins, &best_sel);

    let unlocked = vec![false; weights.len()];
    let (selected, accepted) = refine(
        margins,
        weights,
        best_sel,
        &unlocked,
        seed,
        "refine",
        swap_iterations,
    )?;
    let final_l1 = sample_l1(margins, &selected);
    let floors: Vec<f64> = margins
        .iter()
        .map(|m| floor_l1(m.target.as_slice().unwrap(), n))
        .collect();
    let report = SamplingReport {
        n,
        trials,
        best_trial,
        swap_iterations,
        swaps_accepted: accepted,
        sample_total_l1: total(&final_l1),
        plain_draw_total_l1: total(&plain_l1),
        best_trial_total_l1: total(&best_l1),
        floor_total_l1: total(&floors),
        sample_l1: as_map(&final_l1),
        plain_draw_l1: as_map(&plain_l1),
        best_trial_l1: as_map(&best_l1),
        floor_l1: as_map(&floors),
    };
    Ok(Selection { selected, report })
}

/// Swap refinement; returns the improved selection and the number of accepted swaps.
fn refine(
    margins: &[EncodedMargin],
    weights: &[f64],
    mut sel: Vec<usize>,
    locked: &[bool],
    seed: u64,
    stream: &str,
    iterations: usize,
) -> Result<(Vec<usize>, usize)> {
    let n = sel.len();
    if iterations == 0 || n == 0 {
        return Ok((sel, 0));
    }
    let nf = n as f64;
    let mut cnt = counts(margins, &sel);
    // Target counts n * t per cell; unlisted combinations have target 0.
    let goal: Vec<Vec<f64>> = margins
        .iter()
        .map(|m| {
            m.target
                .iter()
                .map(|t| t * nf)
                .chain(std::iter::once(0.0))
                .collect()
        })
        .collect();
    let slot = |m: &EncodedMargin, i: usize| -> usize {
        let k = m.cell[i];
        if k == UNLISTED {
            m.target.len()
        } else {
            k as usize
        }
    };
    let mut in_sel = vec![false; weights.len()];
    for &i in &sel {
        in_sel[i] = true;
    }
    let alias = WeightedAliasIndex::new(weights.to_vec())?;
    // Per (margin, cell): the positively weighted candidates in it, for targeted proposals.
    let mut members: Vec<Vec<Vec<usize>>> = margins
        .iter()
        .map(|m| vec![Vec::new(); m.target.len() + 1])
        .collect();
    for (mi, m) in margins.iter().enumerate() {
        for (i, &w) in weights.iter().enumerate() {
            if w > 0.0 {
                members[mi][slot(m, i)].push(i);
            }
        }
    }
    let mut cell_alias: HashMap<(usize, usize), WeightedAliasIndex<f64>> = HashMap::new();
    let mut r = rng(seed, STAGE, stream);
    let mut accepted = 0;
    for it in 0..iterations {
        // Even iterations: a random member out, a weight-proportional candidate in.
        // Odd iterations: within one margin, a member of an over-filled cell out and a
        // weight-proportional candidate of an under-filled cell in.
        let (pos, inn) = if it % 2 == 0 {
            (r.random_range(0..n), alias.sample(&mut r))
        } else {
            let mi = r.random_range(0..margins.len());
            let (c, g) = (&cnt[mi], &goal[mi]);
            let under: Vec<usize> = (0..c.len())
                .filter(|&k| (c[k] as f64) + 0.5 < g[k] && !members[mi][k].is_empty())
                .collect();
            if under.is_empty() {
                continue;
            }
            let k = under[r.random_range(0..under.len())];
            let a = cell_alias.entry((mi, k)).or_insert_with(|| {
                WeightedAliasIndex::new(members[mi][k].iter().map(|&i| weights[i]).collect())
                    .expect("positive weights")
            });
            let inn = members[mi][k][a.sample(&mut r)];
            let mut pos = None;
            for _ in 0..32 {
                let p = r.random_range(0..n);
                if locked[sel[p]] {
                    continue;
                }
                let s = slot(&margins[mi], sel[p]);
                if (c[s] as f64) - 0.5 > g[s] {
                    pos = Some(p);
                    break;
                }
            }
            let Some(pos) = pos else { continue };
            (pos, inn)
        };
        let out = sel[pos];
        if in_sel[inn] || locked[out] {
            continue;
        }
        let mut delta = 0.0;
        for (mi, m) in margins.iter().enumerate() {
            let a = slot(m, out);
            let b = slot(m, inn);
            if a == b {
                continue;
            }
            let g = &goal[mi];
            let c = &cnt[mi];
            let (ca, cb) = (c[a] as f64, c[b] as f64);
            delta += ((ca - 1.0) - g[a]).abs() - (ca - g[a]).abs();
            delta += ((cb + 1.0) - g[b]).abs() - (cb - g[b]).abs();
        }
        if delta < -1e-9 {
            for (mi, m) in margins.iter().enumerate() {
                cnt[mi][slot(m, out)] -= 1;
                cnt[mi][slot(m, inn)] += 1;
            }
            in_sel[out] = false;
            in_sel[inn] = true;
            sel[pos] = inn;
            accepted += 1;
        }
    }
    sel.sort_unstable();
    Ok((sel, accepted))
}

/// Replaces dropped profiles: keeps `locked` (already accepted), fills the open places with
/// a weighted draw that avoids `excluded`, then refines by swapping only the new members.
#[allow(clippy::too_many_arguments)]
pub fn refill(
    margins: &[EncodedMargin],
    weights: &[f64],
    locked: &[usize],
    excluded: &std::collections::HashSet<usize>,
    n: usize,
    seed: u64,
    round: usize,
    iterations: usize,
) -> Result<Vec<usize>> {
    let mut mask = vec![false; weights.len()];
    for &i in locked {
        mask[i] = true;
    }
    let open: Vec<f64> = weights
        .iter()
        .enumerate()
        .map(|(i, &w)| {
            if mask[i] || excluded.contains(&i) {
                0.0
            } else {
                w
            }
        })
        .collect();
    let need = n.saturating_sub(locked.len());
    let mut sel = locked.to_vec();
    if need > 0 {
        sel.extend(es_draw(&open, need, seed, &format!("refill/{round}"))?);
    }
    let (sel, _) = refine(
        margins,
        &open,
        sel,
        &mask,
        seed,
        &format!("refill-refine/{round}"),
        iterations,
    )?;
    Ok(sel)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array1;

    #[test]
    fn es_draw_is_without_replacement_and_skips_zero_weights() {
        let w = vec![1.0, 0.0, 2.0, 3.0, 0.5];
        let s = es_draw(&w, 4, 1, "t").unwrap();
        assert_eq!(s.len(), 4);
        assert!(!s.contains(&1));
        assert!(es_draw(&w, 5, 1, "t").is_err());
    }

    #[test]
    fn heavier_candidates_are_drawn_more_often() {
        let w = vec![1.0, 9.0];
        let heavy = (0..2000)
            .filter(|t| es_draw(&w, 1, 3, &t.to_string()).unwrap()[0] == 1)
            .count();
        assert!((1700..1900).contains(&heavy), "{heavy}");
    }

    #[test]
    fn floor_is_zero_when_targets_are_integral() {
        assert_eq!(floor_l1(&[0.25, 0.75], 4), 0.0);
        assert!((floor_l1(&[0.5, 0.5], 3) - (1.0 / 3.0)).abs() < 1e-12);
    }

    #[test]
    fn refinement_reaches_the_floor_on_a_small_problem() {
        // 200 candidates, half in each cell, target 0.3/0.7, sample of 10.
        let cell: Vec<u32> = (0..200).map(|i| (i % 2) as u32).collect();
        let m = EncodedMargin {
            name: "m".into(),
            cell,
            target: Array1::from(vec![0.3, 0.7]),
        };
        let w = vec![1.0; 200];
        let sel = select(std::slice::from_ref(&m), &w, 10, 5, 1, 5000).unwrap();
        assert_eq!(sel.report.sample_l1["m"], 0.0);
        assert!(sel.report.plain_draw_l1["m"] >= sel.report.sample_l1["m"]);
    }
}
