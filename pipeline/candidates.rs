//! Stage 1: candidate seed profiles from the λ-mixture proposal
//! Z ~ λ·π_target + (1−λ)·π_uniform, deduplicated on the 13 seed fields.
//!
//! The target arm walks the margins in manifest order and draws each margin's still-free
//! fields from its cells, conditioned on the fields already drawn; the uniform arm draws
//! every field uniformly (cities within a size class still by population, so exploration
//! does not flood the pool with small towns). Fine-grained seed fields (age, cities, job
//! title) are materialised from the coarse ones; derived fields are then recomputed.

use crate::margins::{Margin, MarginSet};
use crate::profile::Person;
use crate::seeding::{rng, StageRng};
use crate::taxonomy::Taxonomy;
use anyhow::{bail, Result};
use rand::Rng;
use rand_distr::weighted::WeightedIndex;
use rand_distr::Distribution;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};

pub const STAGE: &str = "candidates";

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CandidateReport {
    pub requested: usize,
    pub target_informed: usize,
    pub uniform: usize,
    pub backfill: usize,
    pub duplicates_skipped: usize,
    /// Draws rejected by the taxonomy's minimum-age rules, by field.
    pub rule_rejections: BTreeMap<String, usize>,
    pub draws: usize,
}

/// Fields the proposal draws directly (all categorical fields except the job title, which
/// is materialised from its group).
fn proposal_fields(tax: &Taxonomy) -> Vec<String> {
    let mut v: Vec<String> = [
        "current_country",
        "age_group",
        "sex",
        "current_city_size",
        "birth_country",
        "citizenship",
        "education_level",
        "income_level",
        "relationship_status",
        "religious_belief",
        "ethnicity",
        "occupation_group",
        "physical_condition",
        "mental_condition",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.retain(|f| tax.domain(f).is_some());
    v
}

/// Items with a weighted index over them.
type Choice<T> = (Vec<T>, WeightedIndex<f64>);
/// A margin and the values already drawn for its fields.
type CondKey = (usize, Vec<Option<String>>);

/// Draws candidates; holds the lazily built conditional tables of the target arm.
pub struct Proposer<'a> {
    tax: &'a Taxonomy,
    ms: &'a MarginSet,
    fields: Vec<String>,
    cond_cache: HashMap<CondKey, Option<Choice<usize>>>,
    city_cache: HashMap<(String, Option<String>), Option<Choice<String>>>,
    pub report: CandidateReport,
}

impl<'a> Proposer<'a> {
    pub fn new(tax: &'a Taxonomy, ms: &'a MarginSet) -> Self {
        Self {
            tax,
            ms,
            fields: proposal_fields(tax),
            cond_cache: HashMap::new(),
            city_cache: HashMap::new(),
            report: CandidateReport::default(),
        }
    }

    fn draw_from_margin(
        &mut self,
        mi: usize,
        assigned: &mut BTreeMap<String, String>,
        r: &mut StageRng,
    ) {
        let m: &Margin = &self.ms.margins[mi];
        let key: Vec<Option<String>> = m.fields.iter().map(|f| assigned.get(f).cloned()).collect();
        if key.iter().all(|k| k.is_some()) {
            return;
        }
        let entry = self.cond_cache.entry((mi, key.clone())).or_insert_with(|| {
            let idx: Vec<usize> = (0..m.cells.len())
                .filter(|&c| {
                    key.iter()
                        .zip(&m.cells[c])
                        .all(|(k, v)| k.as_ref().is_none_or(|k| k == v))
                })
                .filter(|&c| m.shares[c] > 0.0)
                .collect();
            if idx.is_empty() {
                return None;
            }
            let w = WeightedIndex::new(idx.iter().map(|&c| m.shares[c])).ok()?;
            Some((idx, w))
        });
        if let Some((idx, w)) = entry {
            let c = idx[w.sample(r)];
            for (f, v) in m.fields.iter().zip(&m.cells[c]) {
                if self.fields.contains(f) {
                    assigned.entry(f.clone()).or_insert_with(|| v.clone());
                }
            }
        }
    }

    fn uniform_value(
        &self,
        field: &str,
        assigned: &BTreeMap<String, String>,
        r: &mut StageRng,
    ) -> Option<String> {
        if field == "current_city_size" {
            let country = assigned.get("current_country")?;
            let classes: Vec<&String> = self
                .tax
                .domain(field)?
                .iter()
                .filter(|c| !self.ms.cities.in_class(country, c).is_empty())
                .collect();
            if classes.is_empty() {
                return None;
            }
            return Some(classes[r.random_range(0..classes.len())].clone());
        }
        let d = self.tax.domain(field)?;
        Some(d[r.random_range(0..d.len())].clone())
    }

    fn pick_city(
        &mut self,
        country: &str,
        class: Option<&str>,
        r: &mut StageRng,
    ) -> Option<String> {
        let key = (country.to_string(), class.map(|s| s.to_string()));
        let cities = &self.ms.cities;
        let entry = self.city_cache.entry(key).or_insert_with(|| {
            let list = match class {
                Some(c) => cities.in_class(country, c),
                None => cities.in_country(country),
            };
            if list.is_empty() {
                return None;
            }
            let w = WeightedIndex::new(list.iter().map(|c| c.population as f64)).ok()?;
            Some((list.iter().map(|c| c.location.clone()).collect(), w))
        });
        entry.as_ref().map(|(locs, w)| locs[w.sample(r)].clone())
    }

    /// One candidate, or `None` when the draw breaks a rule and must be redrawn.
    pub fn draw(
        &mut self,
        id: String,
        arm: &str,
        forced: &BTreeMap<String, String>,
        r: &mut StageRng,
    ) -> Result<Option<Person>> {
        let mut a: BTreeMap<String, String> = forced.clone();
        if arm != "uniform" {
            for mi in 0..self.ms.margins.len() {
                self.draw_from_margin(mi, &mut a, r);
            }
        }
        for f in self.fields.clone() {
            if !a.contains_key(&f) {
                match self.uniform_value(&f, &a, r) {
                    Some(v) => {
                        a.insert(f, v);
                    }
                    None => return Ok(None),
                }
            }
        }
        let group = &a["age_group"];
        let ages = match self.ms.age_in_group.by_group.get(group) {
            Some(v) => v,
            None => bail!("no age distribution for age group {group:?}"),
        };
        let wa = WeightedIndex::new(ages.iter().map(|x| x.1))?;
        let age = ages[wa.sample(r)].0;
        for f in ["education_level", "occupation_group"] {
            if age < self.tax.min_age(f, &a[f]) {
                *self
                    .report
                    .rule_rejections
                    .entry(f.to_string())
                    .or_default() += 1;
                return Ok(None);
            }
        }
        let Some(current) = self.pick_city(&a["current_country"], Some(&a["current_city_size"]), r)
        else {
            return Ok(None);
        };
        let Some(birth) = self.pick_city(&a["birth_country"], None, r) else {
            return Ok(None);
        };
        let titles = self.tax.group_titles(&a["occupation_group"]);
        if titles.is_empty() {
            bail!("occupation group {:?} has no titles", a["occupation_group"]);
        }
        let occupation = titles[r.random_range(0..titles.len())].clone();
        let mut p = Person {
            candidate_id: id,
            proposal: arm.to_string(),
            age,
            sex: a["sex"].clone(),
            ethnicity: a["ethnicity"].clone(),
            citizenship: a["citizenship"].clone(),
            current_location: current,
            birth_location: birth,
            education_level: a["education_level"].clone(),
            income_level: a["income_level"].clone(),
            relationship_status: a["relationship_status"].clone(),
            religious_belief: a["religious_belief"].clone(),
            occupation,
            physical_condition: a["physical_condition"].clone(),
            mental_condition: a["mental_condition"].clone(),
            age_group: String::new(),
            current_country: String::new(),
            birth_country: String::new(),
            current_city_size: String::new(),
            occupation_group: String::new(),
        };
        p.derive(self.tax, &self.ms.cities)?;
        // A forced field the materialisation could not honour would make backfill useless.
        for (f, v) in forced {
            if p.get(f) != Some(v.as_str()) {
                return Ok(None);
            }
        }
        Ok(Some(p))
    }
}

pub fn candidate_id(i: usize) -> String {
    format!("C{i:07}")
}

/// The base pool: `count` unique candidates from the λ-mixture.
pub fn generate(
    seed: u64,
    count: usize,
    lambda: f64,
    attempts_factor: usize,
    tax: &Taxonomy,
    ms: &MarginSet,
    progress: &dyn Fn(u64),
) -> Result<(Vec<Person>, CandidateReport)> {
    let mut prop = Proposer::new(tax, ms);
    prop.report.requested = count;
    let mut r = rng(seed, STAGE, "base");
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(count);
    let max_draws = count.saturating_mul(attempts_factor);
    let empty = BTreeMap::new();
    while out.len() < count {
        if prop.report.draws >= max_draws {
            bail!(
                "only {} unique candidates after {} draws (population.attempts_factor = {attempts_factor}); the value sets are too small for population.candidates = {count}",
                out.len(),
                prop.report.draws
            );
        }
        prop.report.draws += 1;
        let arm = if r.random::<f64>() < lambda {
            "target"
        } else {
            "uniform"
        };
        let Some(p) = prop.draw(candidate_id(out.len() + 1), arm, &empty, &mut r)? else {
            continue;
        };
        if !seen.insert(p.seed_key()) {
            prop.report.duplicates_skipped += 1;
            continue;
        }
        match arm {
            "target" => prop.report.target_informed += 1,
            _ => prop.report.uniform += 1,
        }
        out.push(p);
        if out.len() % 5000 == 0 {
            progress(out.len() as u64);
        }
    }
    Ok((out, prop.report))
}

/// Targeted backfill: `need` new unique candidates inside one margin cell.
#[allow(clippy::too_many_arguments)]
pub fn backfill_cell(
    seed: u64,
    round: usize,
    margin: &Margin,
    cell: usize,
    need: usize,
    attempts_factor: usize,
    tax: &Taxonomy,
    ms: &MarginSet,
    pool: &mut Vec<Person>,
    seen: &mut HashSet<String>,
    report: &mut CandidateReport,
) -> Result<usize> {
    let mut prop = Proposer::new(tax, ms);
    let forced: BTreeMap<String, String> = margin
        .fields
        .iter()
        .cloned()
        .zip(margin.cells[cell].iter().cloned())
        .collect();
    let key = format!(
        "backfill/{round}/{}/{}",
        margin.name,
        margin.cells[cell].join("|")
    );
    let mut r = rng(seed, STAGE, &key);
    let mut added = 0;
    let max_draws = need.saturating_mul(attempts_factor).max(100);
    let mut draws = 0;
    while added < need && draws < max_draws {
        draws += 1;
        let Some(p) = prop.draw(candidate_id(pool.len() + 1), "backfill", &forced, &mut r)? else {
            continue;
        };
        if !seen.insert(p.seed_key()) {
            report.duplicates_skipped += 1;
            continue;
        }
        pool.push(p);
        added += 1;
    }
    report.backfill += added;
    report.draws += draws;
    for (k, v) in prop.report.rule_rejections {
        *report.rule_rejections.entry(k).or_default() += v;
    }
    Ok(added)
}
