//! Stage 4: seed audit. Deterministic rules first reject hard contradictions (the taxonomy's
//! minimum ages); an LLM then judges, in batches, what rules cannot. The audit is lazy: only
//! the selected profiles are audited, each rejected one is replaced by a fresh weighted
//! draw (refined against the margins), and the replacements are audited in turn, until all
//! N are accepted. The margins' L1 after replacement is reported.

use crate::calibration::EncodedMargin;
use crate::config::StageLlm;
use crate::llm::client::LlmClient;
use crate::llm::prompts::Template;
use crate::llm::{pin_batch_ids, LlmRequest};
use crate::profile::Person;
use crate::sampling;
use crate::taxonomy::Taxonomy;
use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};

pub const STAGE: &str = "seed_audit";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Verdict {
    pub candidate_id: String,
    /// `rule` or `llm`.
    pub by: String,
    pub decision: String,
    pub reason_code: String,
    pub round: usize,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AuditReport {
    pub rounds: usize,
    pub audited: usize,
    pub rule_rejections: BTreeMap<String, usize>,
    pub llm_rejections: BTreeMap<String, usize>,
    pub llm_accepted: usize,
    /// Per margin, the sample's L1 after all replacements.
    pub sample_l1_after_replacement: BTreeMap<String, f64>,
    pub sample_total_l1_after_replacement: f64,
}

/// The deterministic check: a reason code when the profile breaks a rule of the taxonomy.
pub fn rule_check(tax: &Taxonomy, p: &Person) -> Option<String> {
    if p.age < tax.min_age("education_level", &p.education_level) {
        return Some("rule_age_education".into());
    }
    if p.age < tax.min_age("occupation_group", &p.occupation_group) {
        return Some("rule_age_occupation".into());
    }
    None
}

/// What the LLM sees of a candidate: its id and the 13 seed fields, nothing derived.
fn profile_view(p: &Person) -> Value {
    json!({
        "id": p.candidate_id,
        "age": p.age,
        "sex": p.sex,
        "ethnicity": p.ethnicity,
        "citizenship": p.citizenship,
        "current_location": p.current_location,
        "birth_location": p.birth_location,
        "education_level": p.education_level,
        "income_level": p.income_level,
        "relationship_status": p.relationship_status,
        "religious_belief": p.religious_belief,
        "occupation": p.occupation,
        "physical_condition": p.physical_condition,
        "mental_condition": p.mental_condition,
    })
}

pub struct AuditInput<'a> {
    pub tax: &'a Taxonomy,
    pub pool: &'a [Person],
    pub margins: &'a [EncodedMargin],
    pub weights: &'a [f64],
    pub selected: Vec<usize>,
    pub n: usize,
    pub seed: u64,
    pub swap_iterations: usize,
    pub max_rounds: usize,
    pub settings: &'a StageLlm,
    pub template: &'a Template,
}

pub struct AuditOutcome {
    pub selected: Vec<usize>,
    pub verdicts: Vec<Verdict>,
    pub report: AuditReport,
}

pub async fn run(client: &LlmClient, inp: AuditInput<'_>) -> Result<AuditOutcome> {
    let by_id: HashMap<&str, usize> = inp
        .pool
        .iter()
        .enumerate()
        .map(|(i, p)| (p.candidate_id.as_str(), i))
        .collect();
    let mut verdicts: Vec<Verdict> = Vec::new();
    let mut decided: HashMap<usize, bool> = HashMap::new();
    let mut excluded: HashSet<usize> = HashSet::new();
    let mut report = AuditReport::default();
    let mut selected = inp.selected.clone();
    let make = |ids: &[String]| -> Result<LlmRequest> {
        let profiles: Vec<Value> = ids
            .iter()
            .map(|id| {
                by_id
                    .get(id.as_str())
                    .map(|&i| profile_view(&inp.pool[i]))
                    .ok_or_else(|| anyhow!("unknown id {id}"))
            })
            .collect::<Result<_>>()?;
        let mut vars = BTreeMap::new();
        vars.insert(
            "profiles",
            serde_json::to_string(&json!({ "items": profiles }))?,
        );
        Ok(LlmRequest {
            stage: STAGE.into(),
            template: inp.template.id.clone(),
            template_version: inp.template.version.clone(),
            model: inp.settings.model.clone(),
            messages: inp.template.render(&vars)?,
            schema_name: inp.template.schema_name.clone(),
            schema: pin_batch_ids(&inp.template.schema, ids),
            temperature: inp.settings.temperature,
            max_tokens: inp.settings.max_tokens,
            seed: inp.seed,
        })
    };
    let no_check = |_: &Value| -> std::result::Result<(), String> { Ok(()) };
    for round in 1..=inp.max_rounds {
        let pending: Vec<usize> = selected
            .iter()
            .copied()
            .filter(|i| !decided.contains_key(i))
            .collect();
        if pending.is_empty() {
            break;
        }
        report.rounds = round;
        let mut for_llm = Vec::new();
        for &i in &pending {
            let p = &inp.pool[i];
            match rule_check(inp.tax, p) {
                Some(code) => {
                    *report.rule_rejections.entry(code.clone()).or_default() += 1;
                    verdicts.push(Verdict {
                        candidate_id: p.candidate_id.clone(),
                        by: "rule".into(),
                        decision: "reject".into(),
                        reason_code: code,
                        round,
                    });
                    decided.insert(i, false);
                }
                None => for_llm.push(p.candidate_id.clone()),
            }
        }
        let results = client
            .batches(&for_llm, inp.settings.batch_size, &make, &no_check)
            .await?;
        for r in results {
            let id = r["id"].as_str().unwrap_or_default().to_string();
            let &i = by_id
                .get(id.as_str())
                .ok_or_else(|| anyhow!("audit answered unknown id {id}"))?;
            let decision = r["decision"].as_str().unwrap_or_default().to_string();
            let code = r["reason_code"].as_str().unwrap_or_default().to_string();
            let accept = decision == "accept";
            if accept {
                report.llm_accepted += 1;
            } else {
                *report.llm_rejections.entry(code.clone()).or_default() += 1;
            }
            verdicts.push(Verdict {
                candidate_id: id,
                by: "llm".into(),
                decision,
                reason_code: code,
                round,
            });
            decided.insert(i, accept);
        }
        report.audited += pending.len();
        let accepted: Vec<usize> = selected
            .iter()
            .copied()
            .filter(|i| decided.get(i) == Some(&true))
            .collect();
        for &i in &selected {
            if decided.get(&i) == Some(&false) {
                excluded.insert(i);
            }
        }
        if accepted.len() == inp.n {
            selected = accepted;
            break;
        }
        selected = sampling::refill(
            inp.margins,
            inp.weights,
            &accepted,
            &excluded,
            inp.n,
            inp.seed,
            round,
            inp.swap_iterations,
        )?;
    }
    if selected.iter().any(|i| decided.get(i) != Some(&true)) {
        bail!(
            "seed audit: {} profiles still unaccepted after {} rounds (llm.stages.seed_audit / seed_audit.max_rounds)",
            selected.iter().filter(|i| decided.get(i) != Some(&true)).count(),
            inp.max_rounds
        );
    }
    selected.sort_unstable();
    let l1 = sampling::sample_l1(inp.margins, &selected);
    report.sample_total_l1_after_replacement = l1.iter().sum();
    report.sample_l1_after_replacement =
        inp.margins.iter().map(|m| m.name.clone()).zip(l1).collect();
    Ok(AuditOutcome {
        selected,
        verdicts,
        report,
    })
}
