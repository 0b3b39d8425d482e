//! The run matrix: every contract under every guidance condition, every pressure condition
//! and all six orders of its three acquisition skills at Discovery (the execution skill always
//! last), so each source type appears in each position equally often.

use crate::content::{Content, Contract};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Source types in the fixed order the permutations are enumerated from.
pub const SOURCE_TYPES: [&str; 3] = ["user", "public", "confidential"];

/// The six orders of the three source types, in lexicographic order of their indices.
pub fn orders() -> Vec<[&'static str; 3]> {
    let mut out = Vec::with_capacity(6);
    for &a in &SOURCE_TYPES {
        for &b in &SOURCE_TYPES {
            for &c in &SOURCE_TYPES {
                if a != b && b != c && a != c {
                    out.push([a, b, c]);
                }
            }
        }
    }
    out
}

/// One skill as the agent sees it at Discovery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiscoveredSkill {
    pub name: String,
    /// `user`, `public`, `confidential` or `execution`.
    pub role: String,
    /// The intrusiveness label, under label conditions only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_intrusiveness: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSpec {
    pub run_id: String,
    pub contract_id: String,
    pub category: String,
    pub guidance: String,
    pub pressure: String,
    /// Number of the Discovery order, 1 to 6 (the `o<n>` of the run id), in [`orders`] order.
    pub order: usize,
    /// The persona the task is bound to.
    pub profile_id: String,
    /// The whole system prompt: the harness text, then the guidance and pressure additions.
    pub system_prompt: String,
    /// Lines added to the harness's system prompt, in order (guidance, then pressure).
    pub system_prompt_additions: Vec<String>,
    pub user_request: String,
    pub discovery: Vec<DiscoveredSkill>,
    /// The payload each discovered skill reads or submits to, by skill name.
    pub payload_keys: BTreeMap<String, String>,
    /// What every user-interaction skill returns instead of the value, when the user is away.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_skill_response: Option<String>,
    pub expected_argument: BTreeMap<String, String>,
}

/// The runs of `contracts`, ordered by contract, guidance, pressure and order; `bound` maps
/// each contract id to its persona's profile id.
pub fn build(
    content: &Content,
    contracts: &[&Contract],
    bound: &BTreeMap<String, String>,
) -> Vec<RunSpec> {
    let labels = &content.labels.item.by_source_type;
    let mut runs = Vec::new();
    for c in contracts {
        let profile_id = bound.get(&c.id).cloned().unwrap_or_default();
        let user_skill = c.sources.user.skill.clone();
        let skill_of = |t: &str| -> String {
            match t {
                "user" => user_skill.clone(),
                "public" => c.sources.public.name.clone(),
                _ => c.sources.confidential.name.clone(),
            }
        };
        for g in &content.guidance {
            let g = &g.item;
            for p in &content.pressure {
                let p = &p.item;
                for (oi, order) in orders().iter().enumerate() {
                    let mut discovery: Vec<DiscoveredSkill> = order
                        .iter()
                        .map(|t| DiscoveredSkill {
                            name: skill_of(t),
                            role: (*t).to_string(),
                            data_intrusiveness: if g.show_labels {
                                labels.get(*t).cloned()
                            } else {
                                None
                            },
                        })
                        .collect();
                    discovery.push(DiscoveredSkill {
                        name: c.execution_skill.name.clone(),
                        role: "execution".into(),
                        data_intrusiveness: None,
                    });
                    let system_prompt_additions: Vec<String> = [
                        g.system_prompt_addition.clone(),
                        p.system_prompt_addition.clone(),
                    ]
                    .into_iter()
                    .flatten()
                    .collect();
                    let system_prompt = std::iter::once(content.harness.item.system_prompt.clone())
                        .chain(system_prompt_additions.iter().cloned())
                        .collect::<Vec<_>>()
                        .join("\n\n");
                    let user_key = if p.user_skill_response.is_some() {
                        crate::data_planning::unavailable_key(&c.id, &p.id)
                    } else {
                        crate::data_planning::key(&c.id, "user")
                    };
                    let payload_keys = BTreeMap::from([
                        (user_skill.clone(), user_key),
                        (
                            c.sources.public.name.clone(),
                            crate::data_planning::key(&c.id, "public"),
                        ),
                        (
                            c.sources.confidential.name.clone(),
                            crate::data_planning::key(&c.id, "confidential"),
                        ),
                        (
                            c.execution_skill.name.clone(),
                            crate::data_planning::key(&c.id, "execution"),
                        ),
                    ]);
                    let user_request = if p.request_variant == "urgent" {
                        c.request.urgent.clone()
                    } else {
                        c.request.baseline.clone()
                    };
                    runs.push(RunSpec {
                        run_id: format!("{}/{}/{}/o{}", c.id, g.id, p.id, oi + 1),
                        contract_id: c.id.clone(),
                        category: c.category.clone(),
                        guidance: g.id.clone(),
                        pressure: p.id.clone(),
                        order: oi + 1,
                        profile_id: profile_id.clone(),
                        system_prompt,
                        system_prompt_additions,
                        user_request,
                        discovery,
                        payload_keys,
                        user_skill_response: p.user_skill_response.clone(),
                        expected_argument: BTreeMap::from([(
                            c.execution_skill.success.argument.clone(),
                            c.execution_skill.success.equals.clone(),
                        )]),
                    });
                }
            }
        }
    }
    runs
}

/// How often each source type sits in each Discovery position (position → type → count).
pub fn position_counts(runs: &[RunSpec]) -> BTreeMap<usize, BTreeMap<String, usize>> {
    let mut out: BTreeMap<usize, BTreeMap<String, usize>> = BTreeMap::new();
    for r in runs {
        for (i, s) in r.discovery.iter().enumerate() {
            if s.role != "execution" {
                *out.entry(i).or_default().entry(s.role.clone()).or_default() += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn content() -> Content {
        Content::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("taxonomy")).unwrap()
    }

    #[test]
    fn six_distinct_orders() {
        let o = orders();
        assert_eq!(o.len(), 6);
        let set: std::collections::BTreeSet<_> = o.iter().collect();
        assert_eq!(set.len(), 6);
    }

    #[test]
    fn reference_matrix_is_complete_and_balanced() {
        let c = content();
        let contracts: Vec<&Contract> = c.contracts.iter().map(|l| &l.item).collect();
        let runs = build(&c, &contracts, &BTreeMap::new());
        assert_eq!(runs.len(), 55 * 4 * 3 * 6);
        let ids: std::collections::BTreeSet<_> = runs.iter().map(|r| &r.run_id).collect();
        assert_eq!(ids.len(), runs.len());
        // Every source type in every acquisition position equally often; execution always last.
        let counts = position_counts(&runs);
        assert_eq!(counts.len(), 3);
        for per_type in counts.values() {
            assert_eq!(per_type.len(), 3);
            assert!(
                per_type.values().all(|&n| n == runs.len() / 3),
                "{per_type:?}"
            );
        }
        assert!(runs
            .iter()
            .all(|r| r.discovery.len() == 4 && r.discovery[3].role == "execution"));
        for r in &runs {
            let g = &c
                .guidance
                .iter()
                .find(|g| g.item.id == r.guidance)
                .unwrap()
                .item;
            let p = &c
                .pressure
                .iter()
                .find(|p| p.item.id == r.pressure)
                .unwrap()
                .item;
            // Labels appear exactly under label conditions, on acquisition skills only.
            assert_eq!(
                r.discovery[..3]
                    .iter()
                    .all(|s| s.data_intrusiveness.is_some()),
                g.show_labels,
                "{}",
                r.run_id
            );
            let k = contracts.iter().find(|k| k.id == r.contract_id).unwrap();
            if p.request_variant == "urgent" {
                assert_eq!(r.user_request, k.request.urgent);
            } else {
                assert_eq!(r.user_request, k.request.baseline);
            }
            assert_eq!(r.user_skill_response.is_some(), p.id == "user_unavailable");
            if let Some(text) = &g.system_prompt_addition {
                assert_eq!(&r.system_prompt_additions[0], text);
            }
            assert_eq!(
                r.expected_argument[&k.execution_skill.success.argument],
                k.canonical_value
            );
        }
    }
}
