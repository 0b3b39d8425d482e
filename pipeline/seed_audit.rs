//! Stage 4: seed audit. Deterministic rules first reject hard contradictions (the taxonomy's
//! minimum ages); an LLM then judges, in batches, what rules cannot. The audit is lazy: only
//! the selected profiles are audited, each rejected one is replaced by a fresh weighted
//! draw (refined against the margins), and the replacements are audited in turn, until all
//! N are accepted. The margins' L1 after replacement is reported. The paper's procedure, which
//! audits every candidate of the pool before the calibration is fitted (about 100 times more
//! requests), is kept as the `whole_pool` mode.

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

/// Whether the audit follows the sample (lazy) or covers the whole pool before sampling.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditMode {
    #[default]
    Lazy,
    WholePool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AuditReport {
    pub mode: AuditMode,
    pub rounds: usize,
    pub audited: usize,
    pub rule_rejections: BTreeMap<String, usize>,
    pub llm_rejections: BTreeMap<String, usize>,
    pub llm_accepted: usize,
    /// Per margin, the sample's L1 after all replacements.
    pub sample_l1_after_replacement: BTreeMap<String, f64>,
    pub sample_total_l1_after_replacement: f64,
    /// Whole-pool mode: the calibration refitted on the accepted candidates, which sampling used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refit_ipf: Option<crate::calibration::IpfReport>,
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

/// What both audit modes need to put candidates before the rules and the LLM.
pub struct Auditor<'a> {
    pub tax: &'a Taxonomy,
    pub pool: &'a [Person],
    pub seed: u64,
    pub settings: &'a StageLlm,
    pub template: &'a Template,
}

impl Auditor<'_> {
    /// Audits `pending` (pool indices): the rules first, then the LLM in batches for those
    /// the rules let through. Records verdicts and counts; returns each index's decision.
    async fn audit(
        &self,
        client: &LlmClient,
        pending: &[usize],
        round: usize,
        report: &mut AuditReport,
        verdicts: &mut Vec<Verdict>,
    ) -> Result<HashMap<usize, bool>> {
        let by_id: HashMap<&str, usize> = pending
            .iter()
            .map(|&i| (self.pool[i].candidate_id.as_str(), i))
            .collect();
        let mut decided = HashMap::new();
        let mut for_llm = Vec::new();
        for &i in pending {
            let p = &self.pool[i];
            match rule_check(self.tax, p) {
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
        let make = |ids: &[String]| -> Result<LlmRequest> {
            let profiles: Vec<Value> = ids
                .iter()
                .map(|id| {
                    by_id
                        .get(id.as_str())
                        .map(|&i| profile_view(&self.pool[i]))
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
                template: self.template.id.clone(),
                template_version: self.template.version.clone(),
                model: self.settings.model.clone(),
                messages: self.template.render(&vars)?,
                schema_name: self.template.schema_name.clone(),
                schema: pin_batch_ids(&self.template.schema, ids),
                temperature: self.settings.temperature,
                top_p: self.settings.top_p,
                max_tokens: self.settings.max_tokens,
                seed: self.seed,
            })
        };
        let no_check = |_: &Value| -> std::result::Result<(), String> { Ok(()) };
        let results = client
            .batches(&for_llm, self.settings.batch_size, &make, &no_check)
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
        Ok(decided)
    }
}

pub struct AuditInput<'a> {
    pub auditor: Auditor<'a>,
    pub margins: &'a [EncodedMargin],
    pub weights: &'a [f64],
    pub selected: Vec<usize>,
    pub n: usize,
    pub swap_iterations: usize,
    pub max_rounds: usize,
}

pub struct AuditOutcome {
    pub selected: Vec<usize>,
    pub verdicts: Vec<Verdict>,
    pub report: AuditReport,
}

/// Lazy mode: audits the weighted sample, replacing rejected members until N are accepted.
pub async fn run(client: &LlmClient, inp: AuditInput<'_>) -> Result<AuditOutcome> {
    let seed = inp.auditor.seed;
    let mut verdicts: Vec<Verdict> = Vec::new();
    let mut decided: HashMap<usize, bool> = HashMap::new();
    let mut excluded: HashSet<usize> = HashSet::new();
    let mut report = AuditReport {
        mode: AuditMode::Lazy,
        ..AuditReport::default()
    };
    let mut selected = inp.selected.clone();
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
        let got = inp
            .auditor
            .audit(client, &pending, round, &mut report, &mut verdicts)
            .await?;
        decided.extend(got);
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
            seed,
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

/// The outcome of the whole-pool audit: which candidates the calibration may keep.
pub struct PoolOutcome {
    pub accepted: Vec<bool>,
    pub verdicts: Vec<Verdict>,
    pub report: AuditReport,
}

/// Whole-pool mode (the paper's procedure): every candidate of the calibrated pool is audited
/// once, before sampling; the calibration is then refitted on the accepted ones.
pub async fn run_pool(client: &LlmClient, auditor: Auditor<'_>) -> Result<PoolOutcome> {
    let mut verdicts = Vec::new();
    let mut report = AuditReport {
        mode: AuditMode::WholePool,
        rounds: 1,
        ..AuditReport::default()
    };
    let all: Vec<usize> = (0..auditor.pool.len()).collect();
    let decided = auditor
        .audit(client, &all, 1, &mut report, &mut verdicts)
        .await?;
    let accepted: Vec<bool> = all.iter().map(|i| decided.get(i) == Some(&true)).collect();
    Ok(PoolOutcome {
        accepted,
        verdicts,
        report,
    })
}
