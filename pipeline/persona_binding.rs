//! Stage 8: binds every contract to a calibrated profile that meets the contract's persona
//! requirements, filling every persona once before any twice, so no persona is over-used.
//! Ties are broken by a hash of the run seed, the contract and the profile: the binding never
//! depends on iteration order or time.

use crate::config::Unsatisfiable;
use crate::content::{Contract, PersonaAttributes};
use crate::identity::govid::Date;
use crate::profile::Profile;
use anyhow::{anyhow, bail, Result};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A bound persona's facts, keyed by persona attribute id (absent facts are left out).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PersonaFacts {
    pub profile_id: String,
    /// `identity_stage` when the identity stage ran (each field's own provenance is in
    /// `profiles.jsonl`), else `planning_fallback` (a deterministic identity made here).
    pub identity_source: String,
    pub facts: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Binding {
    pub contract_id: String,
    pub profile_id: String,
    /// Profiles that met every requirement when this contract was bound.
    pub compatible_profiles: usize,
    /// Requirements the bound persona does not meet (only under `on_unsatisfiable = "relax"`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relaxed: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BindingReport {
    pub contracts: usize,
    pub personas: usize,
    pub max_tasks_per_persona: usize,
    /// Number of personas per task count (tasks → personas).
    pub tasks_per_persona: BTreeMap<usize, usize>,
    pub with_requirements: usize,
    pub relaxed: usize,
    /// The fewest compatible profiles any contract had.
    pub min_compatible_profiles: usize,
}

/// The profile field a persona attribute's `from` names, as text.
fn lookup(profile: &Profile, from: &str) -> Result<Option<String>> {
    let (part, field) = from
        .split_once('.')
        .ok_or_else(|| anyhow!("attribute source {from:?} is not <part>.<field>"))?;
    let v = match part {
        "person" => serde_json::to_value(&profile.person)?,
        "identity" => match &profile.identity {
            Some(i) => serde_json::to_value(i)?,
            None => return Ok(None),
        },
        _ => bail!("attribute source {from:?}: part must be person or identity"),
    };
    let x = v
        .get(field)
        .ok_or_else(|| anyhow!("attribute source {from:?}: the profile has no field {field:?}"))?;
    Ok(match x {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    })
}

/// Everything needed to complete a profile whose identity stage did not run.
pub struct FallbackKit<'a> {
    pub tax: &'a crate::taxonomy::Taxonomy,
    pub cities: &'a crate::margins::CityCatalog,
    pub names: &'a crate::identity::name::NameLists,
    pub reference: Date,
}

/// The facts of `profile`. Without completed identity fields, a deterministic fallback
/// identity (valid by construction) stands in, so every world still has a name and contacts.
pub fn persona_facts(
    attrs: &PersonaAttributes,
    profile: &Profile,
    serial: u32,
    seed: u64,
    kit: &FallbackKit,
) -> Result<PersonaFacts> {
    let mut p = profile.clone();
    let identity_source = if p.identity.is_some() {
        "identity_stage"
    } else {
        let mut r = crate::seeding::rng(seed, "planning-identity", &p.person.candidate_id);
        let dob = crate::identity::birth_date(p.person.age, kit.reference, &mut r);
        let id = crate::identity::fallback(
            kit.tax, kit.cities, kit.names, &p.person, dob, serial, &mut r,
        )
        .ok_or_else(|| anyhow!("no fallback identity for profile {}", p.profile_id))?;
        let document = kit
            .tax
            .country_by_name(&p.person.citizenship)
            .and_then(|c| crate::identity::govid::for_country(&c.iso3))
            .map(|s| s.document().to_string())
            .unwrap_or_default();
        p.identity = Some(crate::profile::IdentityFields {
            date_of_birth: dob.to_string(),
            name: id.name,
            email: id.email,
            phone_number: id.phone_number,
            government_id: id.government_id,
            government_id_document: document,
            identity_provenance: BTreeMap::new(),
        });
        "planning_fallback"
    };
    let mut facts = BTreeMap::new();
    for a in &attrs.attributes {
        let value = match (&a.from, a.derive.as_deref()) {
            (Some(from), _) => lookup(&p, from)?,
            (None, Some("home_address")) => {
                let mut r = crate::seeding::rng(seed, "home-address", &p.profile_id);
                let n: u32 = r.random_range(1..=240);
                let street = &attrs.street_names[r.random_range(0..attrs.street_names.len())];
                Some(format!("{n} {street}, {}", p.person.current_location))
            }
            (None, d) => bail!("persona attribute {}: unknown derivation {d:?}", a.id),
        };
        if let Some(v) = value {
            if !attrs.absent_values.contains(&v) {
                facts.insert(a.id.clone(), v);
            }
        }
    }
    Ok(PersonaFacts {
        profile_id: p.profile_id.clone(),
        identity_source: identity_source.into(),
        facts,
    })
}

fn unmet(c: &Contract, p: &PersonaFacts) -> Vec<String> {
    c.persona_requirements
        .iter()
        .filter(|r| !r.satisfied_by(p.facts.get(&r.attribute).map(String::as_str)))
        .map(|r| r.describe())
        .collect()
}

fn tie_break(seed: u64, contract: &str, profile: &str) -> u64 {
    crate::seeding::rng(seed, "binding", &format!("{contract}\0{profile}")).random()
}

/// Binds `contracts` (most constrained first) to `personas`.
pub fn bind(
    contracts: &[&Contract],
    personas: &[PersonaFacts],
    max_tasks: usize,
    on_unsatisfiable: Unsatisfiable,
    seed: u64,
) -> Result<(Vec<Binding>, BindingReport)> {
    if personas.is_empty() {
        bail!("persona binding: the build has no profiles to bind contracts to");
    }
    if contracts.len() > personas.len() * max_tasks {
        bail!(
            "persona binding: {} contracts need more than {} profiles x {} tasks each; raise \
             planning.max_tasks_per_persona or population.profiles",
            contracts.len(),
            personas.len(),
            max_tasks
        );
    }
    let compatible: Vec<Vec<usize>> = contracts
        .iter()
        .map(|c| {
            (0..personas.len())
                .filter(|&i| unmet(c, &personas[i]).is_empty())
                .collect()
        })
        .collect();
    let mut order: Vec<usize> = (0..contracts.len()).collect();
    order.sort_by(|&a, &b| {
        compatible[a]
            .len()
            .cmp(&compatible[b].len())
            .then_with(|| contracts[a].id.cmp(&contracts[b].id))
    });
    let mut uses = vec![0usize; personas.len()];
    let mut bound: Vec<Option<Binding>> = vec![None; contracts.len()];
    for ci in order {
        let c = contracts[ci];
        let open = |i: &usize| uses[*i] < max_tasks;
        let pick = |pool: &mut dyn Iterator<Item = usize>,
                    rank: &dyn Fn(usize) -> usize|
         -> Option<usize> {
            pool.min_by_key(|&i| {
                (
                    rank(i),
                    uses[i],
                    tie_break(seed, &c.id, &personas[i].profile_id),
                )
            })
        };
        let strict = pick(
            &mut compatible[ci].iter().copied().filter(|i| open(i)),
            &|_| 0,
        );
        let (chosen, relaxed) = match strict {
            Some(i) => (i, vec![]),
            None => match on_unsatisfiable {
                Unsatisfiable::Fail => bail!(
                    "persona binding: no available profile meets the requirements of contract \
                     {} ({}); {} of {} profiles meet them{}. Set planning.on_unsatisfiable = \
                     \"relax\" for a trial population, or build more profiles",
                    c.id,
                    c.persona_requirements
                        .iter()
                        .map(|r| r.describe())
                        .collect::<Vec<_>>()
                        .join("; "),
                    compatible[ci].len(),
                    personas.len(),
                    if compatible[ci].is_empty() {
                        String::new()
                    } else {
                        format!(", all already at {max_tasks} task(s)")
                    }
                ),
                Unsatisfiable::Relax => {
                    let i = pick(&mut (0..personas.len()).filter(|i| open(i)), &|i| {
                        unmet(c, &personas[i]).len()
                    })
                    .expect("capacity was checked above");
                    (i, unmet(c, &personas[i]))
                }
            },
        };
        uses[chosen] += 1;
        bound[ci] = Some(Binding {
            contract_id: c.id.clone(),
            profile_id: personas[chosen].profile_id.clone(),
            compatible_profiles: compatible[ci].len(),
            relaxed,
        });
    }
    let bindings: Vec<Binding> = bound.into_iter().flatten().collect();
    let mut tasks_per_persona = BTreeMap::new();
    for &u in uses.iter().filter(|&&u| u > 0) {
        *tasks_per_persona.entry(u).or_insert(0) += 1;
    }
    let report = BindingReport {
        contracts: bindings.len(),
        personas: uses.iter().filter(|&&u| u > 0).count(),
        max_tasks_per_persona: max_tasks,
        tasks_per_persona,
        with_requirements: contracts
            .iter()
            .filter(|c| !c.persona_requirements.is_empty())
            .count(),
        relaxed: bindings.iter().filter(|b| !b.relaxed.is_empty()).count(),
        min_compatible_profiles: compatible.iter().map(Vec::len).min().unwrap_or(0),
    };
    Ok((bindings, report))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::Requirement;

    fn persona(id: &str, religion: &str, age: u32) -> PersonaFacts {
        PersonaFacts {
            profile_id: id.into(),
            identity_source: "identity_stage".into(),
            facts: BTreeMap::from([
                ("religion".to_string(), religion.to_string()),
                ("age".to_string(), age.to_string()),
            ]),
        }
    }

    fn contract(id: &str, reqs: Vec<Requirement>) -> Contract {
        let c = crate::content::Content::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("taxonomy"),
        )
        .unwrap();
        let mut k = c.contracts[0].item.clone();
        k.id = id.into();
        k.persona_requirements = reqs;
        k
    }

    fn req(attr: &str, any: &[&str]) -> Requirement {
        Requirement {
            attribute: attr.into(),
            any_of: Some(any.iter().map(|s| s.to_string()).collect()),
            none_of: None,
            min: None,
            max: None,
            reason: "test".into(),
        }
    }

    #[test]
    fn constrained_contracts_get_compatible_personas_and_spread() {
        let ps = vec![
            persona("P1", "Buddhist", 30),
            persona("P2", "Christian", 40),
            persona("P3", "Christian", 50),
        ];
        let a = contract("a-01", vec![req("religion", &["Buddhist"])]);
        let b = contract("b-01", vec![]);
        let c = contract("c-01", vec![]);
        let (bs, rep) = bind(&[&b, &c, &a], &ps, 1, Unsatisfiable::Fail, 7).unwrap();
        let of = |id: &str| bs.iter().find(|x| x.contract_id == id).unwrap();
        // The only Buddhist persona goes to the contract that needs it, even though that
        // contract comes last in the input.
        assert_eq!(of("a-01").profile_id, "P1");
        assert_eq!(rep.personas, 3);
        assert_eq!(rep.tasks_per_persona, BTreeMap::from([(1, 3)]));
        // Deterministic: the same seed gives the same binding.
        let (again, _) = bind(&[&b, &c, &a], &ps, 1, Unsatisfiable::Fail, 7).unwrap();
        assert_eq!(bs, again);
    }

    #[test]
    fn every_persona_is_used_once_before_any_twice() {
        let ps: Vec<_> = (0..4)
            .map(|i| persona(&format!("P{i}"), "Hindu", 30))
            .collect();
        let cs: Vec<Contract> = (0..8)
            .map(|i| contract(&format!("x-{i:02}"), vec![]))
            .collect();
        let refs: Vec<&Contract> = cs.iter().collect();
        let (_, rep) = bind(&refs, &ps, 3, Unsatisfiable::Fail, 1).unwrap();
        assert_eq!(rep.tasks_per_persona, BTreeMap::from([(2, 4)]));
    }

    #[test]
    fn unsatisfiable_requirements_fail_or_relax() {
        let ps = vec![persona("P1", "Hindu", 30), persona("P2", "Muslim", 70)];
        let a = contract(
            "a-01",
            vec![
                req("religion", &["Jewish"]),
                Requirement {
                    attribute: "age".into(),
                    any_of: None,
                    none_of: None,
                    min: Some(60),
                    max: None,
                    reason: "test".into(),
                },
            ],
        );
        let e = bind(&[&a], &ps, 1, Unsatisfiable::Fail, 1).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("a-01") && msg.contains("Jewish"), "{msg}");
        let (bs, rep) = bind(&[&a], &ps, 1, Unsatisfiable::Relax, 1).unwrap();
        // The closest persona (meets the age requirement) is chosen and the gap is recorded.
        assert_eq!(bs[0].profile_id, "P2");
        assert_eq!(bs[0].relaxed.len(), 1);
        assert_eq!(rep.relaxed, 1);
    }

    #[test]
    fn capacity_shortfall_is_an_error() {
        let ps = vec![persona("P1", "Hindu", 30)];
        let a = contract("a-01", vec![]);
        let b = contract("b-01", vec![]);
        assert!(bind(&[&a, &b], &ps, 1, Unsatisfiable::Relax, 1).is_err());
    }
}
