//! Contract authoring and review: new contracts are authored by an LLM for configured
//! (category, subtype, domain) slots; every contract is then voted on by the reviewer personas
//! of `taxonomy/reviewers.json`, each giving a verdict per criterion. Votes are aggregated by
//! the configured rule. A gated contract that is not accepted (or that fails the deterministic
//! contract checks) is rewritten with the reasons and voted on again, up to the round limit,
//! and then discarded. Every vote is kept.

use crate::config::{Aggregation, ContractsStage, CuratedReview, StageLlm};
use crate::content::{Content, Contract};
use crate::llm::client::LlmClient;
use crate::llm::prompts::Template;
use crate::llm::{pin_batch_ids, pin_batch_items, LlmRequest};
use crate::policy_validation::check_contract;
use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

pub const REVIEW_STAGE: &str = "contract_review";
pub const REWRITE_STAGE: &str = "contract_rewrite";
pub const AUTHORING_STAGE: &str = "contract_authoring";

/// One persona's verdict on one version of one contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Vote {
    pub contract_id: String,
    pub round: usize,
    pub persona: String,
    /// sha256 of the contract version voted on.
    pub contract_sha256: String,
    pub criteria: BTreeMap<String, String>,
    pub decision: String,
    pub reasons: String,
}

/// The aggregated outcome of one round of votes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Accepted,
    /// Votes disagree and the rule does not accept.
    Split,
    /// Every persona rejected.
    Rejected,
    /// The deterministic checks failed, so the version was not put to a vote.
    FailedChecks,
}

/// Applies the aggregation rule to one round's accept/reject votes.
pub fn aggregate(rule: Aggregation, accepts: &[bool]) -> Decision {
    let yes = accepts.iter().filter(|a| **a).count();
    let n = accepts.len();
    let accepted = match rule {
        Aggregation::Unanimous => n > 0 && yes == n,
        Aggregation::Majority => 2 * yes > n,
    };
    if accepted {
        Decision::Accepted
    } else if yes == 0 {
        Decision::Rejected
    } else {
        Decision::Split
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReviewSummary {
    /// `gate` (the votes decide) or `advisory` (recorded only).
    pub mode: String,
    /// Decision of the last round.
    pub decision: Decision,
    pub rounds: usize,
    pub revisions: usize,
    pub accept_votes: usize,
    pub votes: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReviewedContract {
    #[serde(flatten)]
    pub contract: Contract,
    /// Absent when the review stage is off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review: Option<ReviewSummary>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Discarded {
    pub contract: Contract,
    pub rounds: usize,
    pub last_decision: Decision,
    pub reasons: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ContractsReport {
    pub aggregation: String,
    pub curated_review: String,
    pub max_review_rounds: usize,
    pub curated: usize,
    pub generated_requested: usize,
    pub generated_kept: usize,
    pub discarded: usize,
    pub votes: usize,
    pub rewrites: usize,
    /// First-round decisions over all contracts.
    pub first_round: BTreeMap<String, usize>,
    /// Share of accept votes per persona, over all rounds.
    pub persona_accept_rate: BTreeMap<String, f64>,
}

pub struct Templates {
    pub review: Template,
    pub rewrite: Template,
    pub authoring: Template,
}

pub struct Settings<'a> {
    pub review: &'a StageLlm,
    pub rewrite: &'a StageLlm,
    pub authoring: &'a StageLlm,
    pub stage: &'a ContractsStage,
    pub seed: u64,
}

pub struct Outcome {
    pub contracts: Vec<ReviewedContract>,
    pub votes: Vec<Vote>,
    pub discarded: Vec<Discarded>,
    pub report: ContractsReport,
}

fn contract_sha(c: &Contract) -> String {
    crate::fsio::sha256_hex(&serde_json::to_vec(c).expect("contract serialises"))
}

/// The contract definition of the content schema with every `$ref` inlined, since grammar
/// converters and some endpoints do not resolve references.
fn contract_schema(content: &Content) -> Result<Value> {
    let path = content.dir.join("schemas/contracts.schema.json");
    let doc: Value = serde_json::from_slice(&std::fs::read(&path)?)
        .map_err(|e| anyhow!("{}: {e}", path.display()))?;
    let defs = doc["$defs"].clone();
    // `description` annotations are dropped to keep prompts and grammars short, but not
    // properties that happen to be called "description".
    fn inline(v: &Value, defs: &Value, depth: usize, is_properties: bool) -> Value {
        match v {
            Value::Object(m) => {
                if let Some(r) = m.get("$ref").and_then(|r| r.as_str()) {
                    if let Some(name) = r.strip_prefix("#/$defs/") {
                        if depth < 8 {
                            return inline(&defs[name], defs, depth + 1, false);
                        }
                    }
                }
                Value::Object(
                    m.iter()
                        .filter(|(k, _)| is_properties || k.as_str() != "description")
                        .map(|(k, x)| {
                            let child_is_properties = !is_properties && k == "properties";
                            (k.clone(), inline(x, defs, depth, child_is_properties))
                        })
                        .collect(),
                )
            }
            Value::Array(a) => {
                Value::Array(a.iter().map(|x| inline(x, defs, depth, false)).collect())
            }
            other => other.clone(),
        }
    }
    let mut schema = inline(&defs["contract"], &defs, 0, false);
    // Record fields must come from the planning vocabulary, so every field can be filled.
    let labels: Vec<&String> = content.record_fields.item.fields.keys().collect();
    for env in ["public", "confidential"] {
        let ptr = format!(
            "/properties/sources/properties/{env}/properties/record/properties/fields/items"
        );
        if let Some(items) = schema.pointer_mut(&ptr) {
            *items = json!({ "enum": labels });
        }
    }
    Ok(schema)
}

/// Per-item fixed fields of an authored or rewritten contract.
fn pins(id: &str, category: &str, subtype: &str, domain: &str, origin: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("id".into(), json!({"const": id}));
    m.insert("category".into(), json!({"const": category}));
    m.insert("subtype".into(), json!({"const": subtype}));
    m.insert("domain".into(), json!({"const": domain}));
    m.insert("origin".into(), json!({"const": origin}));
    m
}

/// What a reviewer sees of a contract: everything but the input schema's internals.
fn review_view(content: &Content, c: &Contract) -> Value {
    let cat = content.category(&c.category);
    let sub = cat.and_then(|k| k.subtypes.iter().find(|s| s.id == c.subtype));
    json!({
        "id": c.id,
        "category": cat.map(|k| k.name.clone()).unwrap_or_else(|| c.category.clone()),
        "subtype": sub.map(|s| format!("{}: {}", s.name, s.description)).unwrap_or_else(|| c.subtype.clone()),
        "domain": content.domain(&c.domain).map(|d| d.name.clone()).unwrap_or_else(|| c.domain.clone()),
        "attribute": c.attribute.label,
        "modality": c.attribute.modality,
        "canonical_value": c.canonical_value,
        "action": c.execution_skill.action,
        "user_source": c.sources.user.skill,
        "no_sign_in_source": {"kind": c.sources.public.kind, "description": c.sources.public.description, "record": c.sources.public.record},
        "account_source": {"kind": c.sources.confidential.kind, "description": c.sources.confidential.description, "record": c.sources.confidential.record},
        "request": c.request.baseline,
        "urgent_request": c.request.urgent,
    })
}

struct Run<'a> {
    client: &'a LlmClient,
    content: &'a Content,
    t: &'a Templates,
    s: &'a Settings<'a>,
    contract_schema: Value,
}

/// Accepts an answer entry only if it parses as a contract.
fn parse_contract(v: &Value) -> std::result::Result<(), String> {
    serde_json::from_value::<Contract>(v.clone())
        .map(|_| ())
        .map_err(|e| format!("not a contract: {e}"))
}

impl Run<'_> {
    /// A request of one of the three stages, from its template, settings and answer schema.
    fn request(
        &self,
        stage: &str,
        t: &Template,
        st: &StageLlm,
        vars: &BTreeMap<&str, String>,
        schema: Value,
    ) -> Result<LlmRequest> {
        Ok(LlmRequest {
            stage: stage.into(),
            template: t.id.clone(),
            template_version: t.version.clone(),
            model: st.model.clone(),
            messages: t.render(vars)?,
            schema_name: t.schema_name.clone(),
            schema,
            temperature: st.temperature,
            top_p: st.top_p,
            max_tokens: st.max_tokens,
            seed: self.s.seed,
        })
    }

    /// The answer schema of a contract-returning template: its items are the contract definition.
    fn contract_answer_schema(&self, t: &Template) -> Value {
        let mut schema = t.schema.clone();
        if let Some(it) = schema.pointer_mut("/properties/results/items") {
            *it = self.contract_schema.clone();
        }
        schema
    }

    /// One round of votes by every persona on `contracts`.
    async fn vote(&self, contracts: &[&Contract], round: usize) -> Result<Vec<Vote>> {
        let by_id: HashMap<&str, &Contract> =
            contracts.iter().map(|c| (c.id.as_str(), *c)).collect();
        let ids: Vec<String> = contracts.iter().map(|c| c.id.clone()).collect();
        let criteria_ids: Vec<String> =
            self.content.criteria.iter().map(|c| c.id.clone()).collect();
        let criteria_text: String = self
            .content
            .criteria
            .iter()
            .map(|c| format!("- {}: {}", c.id, c.question))
            .collect::<Vec<_>>()
            .join("\n");
        let mut schema = self.t.review.schema.clone();
        if let Some(crit) = schema.pointer_mut("/properties/results/items/properties/criteria") {
            let props: Map<String, Value> = criteria_ids
                .iter()
                .map(|id| (id.clone(), json!({"enum": ["pass", "fail"]})))
                .collect();
            *crit = json!({"type": "object", "required": criteria_ids, "additionalProperties": false, "properties": props});
        }
        let mut votes = Vec::new();
        for persona in &self.content.personas {
            let make = |batch: &[String]| -> Result<LlmRequest> {
                let items: Vec<Value> = batch
                    .iter()
                    .map(|id| {
                        by_id
                            .get(id.as_str())
                            .map(|c| review_view(self.content, c))
                            .ok_or_else(|| anyhow!("unknown contract {id}"))
                    })
                    .collect::<Result<_>>()?;
                let mut vars = BTreeMap::new();
                vars.insert("persona_name", persona.name.clone());
                vars.insert("persona_perspective", persona.perspective.clone());
                vars.insert("criteria", criteria_text.clone());
                vars.insert(
                    "contracts",
                    serde_json::to_string(&json!({ "reviewer": persona.id, "items": items }))?,
                );
                self.request(
                    REVIEW_STAGE,
                    &self.t.review,
                    self.s.review,
                    &vars,
                    pin_batch_ids(&schema, batch),
                )
            };
            let none = |_: &Value| -> std::result::Result<(), String> { Ok(()) };
            let results = self
                .client
                .batches(&ids, self.s.review.batch_size, &make, &none)
                .await?;
            for r in results {
                let id = r["id"].as_str().unwrap_or_default();
                let c = by_id
                    .get(id)
                    .ok_or_else(|| anyhow!("review answered unknown contract {id}"))?;
                let criteria: BTreeMap<String, String> = r["criteria"]
                    .as_object()
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                            .collect()
                    })
                    .unwrap_or_default();
                votes.push(Vote {
                    contract_id: id.to_string(),
                    round,
                    persona: persona.id.clone(),
                    contract_sha256: contract_sha(c),
                    criteria,
                    decision: r["decision"].as_str().unwrap_or_default().to_string(),
                    reasons: r["reasons"].as_str().unwrap_or_default().to_string(),
                });
            }
        }
        Ok(votes)
    }

    /// Asks for revised versions of `items` (contract, reasons); returns them by id.
    async fn rewrite(
        &self,
        items: &[(&Contract, Vec<String>)],
    ) -> Result<HashMap<String, Contract>> {
        let by_id: HashMap<&str, &(&Contract, Vec<String>)> =
            items.iter().map(|it| (it.0.id.as_str(), it)).collect();
        let ids: Vec<String> = items.iter().map(|it| it.0.id.clone()).collect();
        let schema = self.contract_answer_schema(&self.t.rewrite);
        let make = |batch: &[String]| -> Result<LlmRequest> {
            let mut views = Vec::new();
            let mut overrides = Vec::new();
            for id in batch {
                let (c, reasons) = by_id
                    .get(id.as_str())
                    .ok_or_else(|| anyhow!("unknown contract {id}"))?;
                views.push(json!({"id": id, "contract": c, "rejected_because": reasons}));
                overrides.push(pins(&c.id, &c.category, &c.subtype, &c.domain, &c.origin));
            }
            let mut vars = BTreeMap::new();
            vars.insert(
                "description_template",
                self.content.rules.item.description_template.clone(),
            );
            vars.insert("items", serde_json::to_string(&json!({ "items": views }))?);
            self.request(
                REWRITE_STAGE,
                &self.t.rewrite,
                self.s.rewrite,
                &vars,
                pin_batch_items(&schema, batch, &overrides),
            )
        };
        let results = self
            .client
            .batches(&ids, self.s.rewrite.batch_size, &make, &parse_contract)
            .await?;
        results
            .into_iter()
            .map(|v| {
                let c: Contract = serde_json::from_value(v)?;
                Ok((c.id.clone(), c))
            })
            .collect()
    }

    /// New contracts for the configured slots, numbered after the curated ones.
    async fn author(&self) -> Result<Vec<Contract>> {
        let mut slots: Vec<(String, &str, &str, &str)> = Vec::new();
        let mut next: BTreeMap<&str, usize> = BTreeMap::new();
        for c in &self.content.contracts {
            let n = c
                .item
                .id
                .rsplit('-')
                .next()
                .and_then(|x| x.parse::<usize>().ok())
                .unwrap_or(0);
            let e = next.entry(c.item.category.as_str()).or_insert(0);
            *e = (*e).max(n);
        }
        for (i, g) in self.s.stage.generate.iter().enumerate() {
            let cat = self.content.category(&g.category).ok_or_else(|| {
                anyhow!(
                    "contracts.generate[{i}].category: unknown category {:?}",
                    g.category
                )
            })?;
            if !cat.subtypes.iter().any(|s| s.id == g.subtype) {
                bail!(
                    "contracts.generate[{i}].subtype: {:?} is not a subtype of {}",
                    g.subtype,
                    g.category
                );
            }
            if self.content.domain(&g.domain).is_none() {
                bail!(
                    "contracts.generate[{i}].domain: unknown domain {:?}",
                    g.domain
                );
            }
            for _ in 0..g.count {
                let e = next.entry(cat.id.as_str()).or_insert(0);
                *e += 1;
                slots.push((
                    format!("{}-{:02}", cat.id, e),
                    &cat.id,
                    &g.subtype,
                    &g.domain,
                ));
            }
        }
        if slots.is_empty() {
            return Ok(Vec::new());
        }
        let by_id: HashMap<&str, &(String, &str, &str, &str)> =
            slots.iter().map(|s| (s.0.as_str(), s)).collect();
        let ids: Vec<String> = slots.iter().map(|s| s.0.clone()).collect();
        let schema = self.contract_answer_schema(&self.t.authoring);
        let kinds = |t: &str| {
            self.content
                .source_type(t)
                .map(|s| s.kinds.join(", "))
                .unwrap_or_default()
        };
        let skills: String = self
            .content
            .interaction_skills
            .iter()
            .map(|s| format!("{} for {}", s.name, s.modality))
            .collect::<Vec<_>>()
            .join("; ");
        let make = |batch: &[String]| -> Result<LlmRequest> {
            let mut views = Vec::new();
            let mut overrides = Vec::new();
            for id in batch {
                let (id, cat, sub, dom) = by_id
                    .get(id.as_str())
                    .ok_or_else(|| anyhow!("unknown slot {id}"))?;
                let category = self.content.category(cat).expect("checked above");
                let subtype = category
                    .subtypes
                    .iter()
                    .find(|s| s.id == *sub)
                    .expect("checked");
                let domain = self.content.domain(dom).expect("checked above");
                views.push(json!({
                    "id": id, "category": cat, "category_name": category.name,
                    "subtype": sub, "subtype_description": subtype.description,
                    "domain": dom, "domain_description": domain.description,
                }));
                overrides.push(pins(id, cat, sub, dom, "generated"));
            }
            let mut vars = BTreeMap::new();
            vars.insert("interaction_skills", skills.clone());
            vars.insert("public_kinds", kinds("public"));
            vars.insert("confidential_kinds", kinds("confidential"));
            vars.insert(
                "description_template",
                self.content.rules.item.description_template.clone(),
            );
            vars.insert("items", serde_json::to_string(&json!({ "items": views }))?);
            self.request(
                AUTHORING_STAGE,
                &self.t.authoring,
                self.s.authoring,
                &vars,
                pin_batch_items(&schema, batch, &overrides),
            )
        };
        let results = self
            .client
            .batches(&ids, self.s.authoring.batch_size, &make, &parse_contract)
            .await?;
        results
            .into_iter()
            .map(|v| Ok(serde_json::from_value(v)?))
            .collect()
    }
}

/// Reasons to rewrite a contract after a round: failing criteria and reasons of the personas
/// that rejected it.
fn reasons_from_votes(votes: &[&Vote]) -> Vec<String> {
    votes
        .iter()
        .filter(|v| v.decision != "accept")
        .map(|v| {
            let failed: Vec<&str> = v
                .criteria
                .iter()
                .filter(|(_, r)| r.as_str() != "pass")
                .map(|(k, _)| k.as_str())
                .collect();
            format!(
                "{}: failed {}; {}",
                v.persona,
                if failed.is_empty() {
                    "no criterion".to_string()
                } else {
                    failed.join(", ")
                },
                v.reasons.trim()
            )
        })
        .collect()
}

pub async fn run(
    client: &LlmClient,
    content: &Content,
    t: &Templates,
    s: &Settings<'_>,
) -> Result<Outcome> {
    let run = Run {
        client,
        content,
        t,
        s,
        contract_schema: contract_schema(content)?,
    };
    let rule = s.stage.aggregation;
    let gate_curated = s.stage.curated_review == CuratedReview::Gate;
    let generated = run.author().await?;
    let mut report = ContractsReport {
        aggregation: format!("{rule:?}").to_lowercase(),
        curated_review: format!("{:?}", s.stage.curated_review).to_lowercase(),
        max_review_rounds: s.stage.max_review_rounds,
        curated: content.contracts.len(),
        generated_requested: generated.len(),
        ..Default::default()
    };

    // (current version, revisions, gated)
    let mut pending: Vec<(Contract, usize, bool)> = content
        .contracts
        .iter()
        .map(|l| (l.item.clone(), 0, gate_curated))
        .chain(generated.into_iter().map(|c| (c, 0, true)))
        .collect();
    let mut votes: Vec<Vote> = Vec::new();
    let mut kept: Vec<ReviewedContract> = Vec::new();
    let mut discarded: Vec<Discarded> = Vec::new();
    let check_file = Path::new("contract");

    for round in 1..=s.stage.max_review_rounds.max(1) {
        if pending.is_empty() {
            break;
        }
        // Deterministic checks first: a version that fails them is not put to a vote.
        let mut failed: HashMap<String, Vec<String>> = HashMap::new();
        for (c, _, gated) in &pending {
            if *gated {
                let mut findings = check_contract(content, check_file, "", c);
                findings.extend(crate::data_planning::check_contract(
                    content, check_file, "", c,
                ));
                if !findings.is_empty() {
                    failed.insert(
                        c.id.clone(),
                        findings
                            .iter()
                            .map(|f| format!("check {}: {}", f.field, f.message))
                            .collect(),
                    );
                }
            }
        }
        let to_vote: Vec<&Contract> = pending
            .iter()
            .filter(|(c, _, _)| !failed.contains_key(&c.id))
            .map(|(c, _, _)| c)
            .collect();
        let round_votes = run.vote(&to_vote, round).await?;
        let mut by_contract: HashMap<&str, Vec<&Vote>> = HashMap::new();
        for v in &round_votes {
            by_contract
                .entry(v.contract_id.as_str())
                .or_default()
                .push(v);
        }

        let mut next = Vec::new();
        let mut rewrite_items: Vec<(Contract, usize, Vec<String>)> = Vec::new();
        for (c, revisions, gated) in pending {
            let cv = by_contract.get(c.id.as_str()).cloned().unwrap_or_default();
            let (decision, reasons) = match failed.get(&c.id) {
                Some(r) => (Decision::FailedChecks, r.clone()),
                None => {
                    let accepts: Vec<bool> = cv.iter().map(|v| v.decision == "accept").collect();
                    (aggregate(rule, &accepts), reasons_from_votes(&cv))
                }
            };
            if round == 1 {
                *report
                    .first_round
                    .entry(
                        serde_json::to_value(decision)?
                            .as_str()
                            .unwrap_or("")
                            .to_string(),
                    )
                    .or_default() += 1;
            }
            let summary = ReviewSummary {
                mode: if gated { "gate" } else { "advisory" }.into(),
                decision,
                rounds: round,
                revisions,
                accept_votes: cv.iter().filter(|v| v.decision == "accept").count(),
                votes: cv.len(),
            };
            if !gated || decision == Decision::Accepted {
                kept.push(ReviewedContract {
                    contract: c,
                    review: Some(summary),
                });
            } else if round == s.stage.max_review_rounds.max(1) {
                discarded.push(Discarded {
                    contract: c,
                    rounds: round,
                    last_decision: decision,
                    reasons,
                });
            } else {
                rewrite_items.push((c, revisions, reasons));
            }
        }
        votes.extend(round_votes);
        if !rewrite_items.is_empty() {
            let refs: Vec<(&Contract, Vec<String>)> = rewrite_items
                .iter()
                .map(|(c, _, r)| (c, r.clone()))
                .collect();
            let mut revised = run.rewrite(&refs).await?;
            report.rewrites += rewrite_items.len();
            for (c, revisions, _) in rewrite_items {
                let new = revised.remove(&c.id).unwrap_or(c);
                next.push((new, revisions + 1, true));
            }
        }
        pending = next;
    }

    kept.sort_by(|a, b| a.contract.id.cmp(&b.contract.id));
    discarded.sort_by(|a, b| a.contract.id.cmp(&b.contract.id));
    report.generated_kept = kept
        .iter()
        .filter(|k| k.contract.origin == "generated")
        .count();
    report.discarded = discarded.len();
    report.votes = votes.len();
    for p in &content.personas {
        let mine: Vec<&Vote> = votes.iter().filter(|v| v.persona == p.id).collect();
        if !mine.is_empty() {
            let yes = mine.iter().filter(|v| v.decision == "accept").count();
            report
                .persona_accept_rate
                .insert(p.id.clone(), yes as f64 / mine.len() as f64);
        }
    }
    Ok(Outcome {
        contracts: kept,
        votes,
        discarded,
        report,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregation_rules() {
        use Aggregation::*;
        assert_eq!(
            aggregate(Unanimous, &[true, true, true]),
            Decision::Accepted
        );
        assert_eq!(aggregate(Unanimous, &[true, true, false]), Decision::Split);
        assert_eq!(
            aggregate(Unanimous, &[false, false, false]),
            Decision::Rejected
        );
        assert_eq!(
            aggregate(Majority, &[true, true, false]),
            Decision::Accepted
        );
        assert_eq!(aggregate(Majority, &[true, false, false]), Decision::Split);
        assert_eq!(
            aggregate(Majority, &[false, false, false]),
            Decision::Rejected
        );
        assert_eq!(aggregate(Majority, &[true, false]), Decision::Split);
        assert_eq!(aggregate(Unanimous, &[]), Decision::Rejected);
    }
}
