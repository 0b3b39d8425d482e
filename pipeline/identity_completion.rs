//! Stage 5: identity completion. An LLM invents name, email, phone number and government
//! identifier for every accepted profile (seed fields are immutable: only these four keys
//! are read from its answers). Deterministic validators check each field and uniqueness; an
//! LLM audit reviews identifiers against the evidence decoded from them; a failing field is
//! regenerated alone with the rejection reason, up to a limit, and then replaced by a value
//! valid by construction. Each field records where its final value came from.

use crate::config::StageLlm;
use crate::identity::govid::{Date, Evidence};
use crate::identity::name::NameLists;
use crate::identity::{self, email, FieldProblem, Holder, Identity};
use crate::llm::client::LlmClient;
use crate::llm::prompts::Template;
use crate::llm::{pin_batch_ids, pin_batch_items, LlmRequest};
use crate::margins::CityCatalog;
use crate::profile::Person;
use crate::seeding::rng;
use crate::taxonomy::Taxonomy;
use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};

pub const STAGE: &str = "identity_completion";
pub const REPAIR_STAGE: &str = "identity_repair";
pub const AUDIT_STAGE: &str = "govid_audit";
pub const FIELDS: [&str; 4] = ["name", "email", "phone_number", "government_id"];

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CompletedIdentity {
    pub candidate_id: String,
    pub date_of_birth: Date,
    pub identity: Identity,
    pub government_id_document: String,
    /// Per field: `llm`, `llm_repaired` or `fallback`.
    pub provenance: BTreeMap<String, String>,
    pub government_id_evidence: Option<Evidence>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct FieldRates {
    pub llm: usize,
    pub llm_repaired: usize,
    pub fallback: usize,
    /// Values rejected at first check.
    pub initial_failures: usize,
    pub repair_requests: usize,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct IdentityReport {
    pub profiles: usize,
    pub repair_rounds: usize,
    pub fields: BTreeMap<String, FieldRates>,
    pub govid_audit_requests: usize,
    pub govid_audit_accepted: usize,
    pub govid_audit_rejections: BTreeMap<String, usize>,
    /// Problems by kind over all checks, e.g. "government_id: check digit".
    pub problems: BTreeMap<String, usize>,
}

pub struct Templates {
    pub completion: Template,
    pub repair: Template,
    pub audit: Template,
}

pub struct Settings<'a> {
    pub completion: &'a StageLlm,
    pub repair: &'a StageLlm,
    pub audit: &'a StageLlm,
    pub max_repair_rounds: usize,
}

pub struct Input<'a> {
    pub tax: &'a Taxonomy,
    pub cities: &'a CityCatalog,
    pub names: &'a NameLists,
    pub people: Vec<&'a Person>,
    pub reference: Date,
    pub seed: u64,
    pub syntax_hints: bool,
}

fn document_of(tax: &Taxonomy, p: &Person) -> String {
    tax.country_by_name(&p.citizenship)
        .and_then(|c| identity::govid::for_country(&c.iso3))
        .map(|s| s.document().to_string())
        .unwrap_or_default()
}

fn view(p: &Person, dob: Date, document: &str) -> Value {
    json!({
        "id": p.candidate_id, "age": p.age, "date_of_birth": dob.to_string(), "sex": p.sex,
        "citizenship": p.citizenship, "current_location": p.current_location, "birth_location": p.birth_location,
        "ethnicity": p.ethnicity, "occupation": p.occupation, "government_id_document": document,
    })
}

fn request(
    t: &Template,
    s: &StageLlm,
    var: &str,
    payload: Value,
    ids: &[String],
    overrides: &[serde_json::Map<String, Value>],
    seed: u64,
) -> Result<LlmRequest> {
    let mut vars = BTreeMap::new();
    vars.insert(var, serde_json::to_string(&payload)?);
    Ok(LlmRequest {
        stage: t.id.clone(),
        template: t.id.clone(),
        template_version: t.version.clone(),
        model: s.model.clone(),
        messages: t.render(&vars)?,
        schema_name: t.schema_name.clone(),
        schema: if overrides.is_empty() {
            pin_batch_ids(&t.schema, ids)
        } else {
            pin_batch_items(&t.schema, ids, overrides)
        },
        temperature: s.temperature,
        top_p: s.top_p,
        max_tokens: s.max_tokens,
        seed,
    })
}

fn text(v: &Value, k: &str) -> String {
    v.get(k)
        .and_then(|x| x.as_str())
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Field problems of every profile, uniqueness included (the earlier profile keeps a value).
fn all_problems(
    inp: &Input,
    dobs: &[Date],
    ids: &[Identity],
) -> (Vec<Vec<FieldProblem>>, Vec<Option<Evidence>>) {
    let mut problems = Vec::with_capacity(ids.len());
    let mut evidence = Vec::with_capacity(ids.len());
    let mut seen: HashMap<(&str, String), &str> = HashMap::new();
    for (i, id) in ids.iter().enumerate() {
        let p = inp.people[i];
        let h = Holder {
            person: p,
            date_of_birth: dobs[i],
            reference: inp.reference,
        };
        let (mut pr, ev) = identity::validate(inp.tax, &h, id);
        for (field, key) in [
            ("email", email::unique_key(&id.email)),
            ("phone_number", id.phone_number.clone()),
            ("government_id", id.government_id.clone()),
        ] {
            match seen.get(&(field, key.clone())) {
                Some(other) => pr.push(FieldProblem {
                    field: field.into(),
                    problem: format!("duplicate of {other}'s"),
                }),
                None => {
                    seen.insert((field, key), p.candidate_id.as_str());
                }
            }
        }
        problems.push(pr);
        evidence.push(ev);
    }
    (problems, evidence)
}

fn kind(p: &FieldProblem) -> String {
    let head = p.problem.split([':', '(']).next().unwrap_or("").trim();
    format!("{}: {}", p.field, head)
}

pub async fn run(
    client: &LlmClient,
    inp: Input<'_>,
    t: &Templates,
    s: &Settings<'_>,
) -> Result<(Vec<CompletedIdentity>, IdentityReport)> {
    let n = inp.people.len();
    let idx: HashMap<&str, usize> = inp
        .people
        .iter()
        .enumerate()
        .map(|(i, p)| (p.candidate_id.as_str(), i))
        .collect();
    let dobs: Vec<Date> = inp
        .people
        .iter()
        .map(|p| {
            identity::birth_date(
                p.age,
                inp.reference,
                &mut rng(inp.seed, "date_of_birth", &p.candidate_id),
            )
        })
        .collect();
    let docs: Vec<String> = inp.people.iter().map(|p| document_of(inp.tax, p)).collect();
    let mut report = IdentityReport {
        profiles: n,
        ..Default::default()
    };
    for f in FIELDS {
        report.fields.insert(f.into(), FieldRates::default());
    }
    let no_check = |_: &Value| -> std::result::Result<(), String> { Ok(()) };

    // 1. Completion.
    let all_ids: Vec<String> = inp.people.iter().map(|p| p.candidate_id.clone()).collect();
    let make = |ids: &[String]| -> Result<LlmRequest> {
        let items: Vec<Value> = ids
            .iter()
            .map(|id| {
                idx.get(id.as_str())
                    .map(|&i| view(inp.people[i], dobs[i], &docs[i]))
                    .ok_or_else(|| anyhow!("unknown id {id}"))
            })
            .collect::<Result<_>>()?;
        let overrides: Vec<serde_json::Map<String, Value>> = ids
            .iter()
            .map(|id| {
                field_schemas(&inp, inp.people[idx[id.as_str()]])
                    .into_iter()
                    .collect()
            })
            .collect();
        request(
            &t.completion,
            s.completion,
            "profiles",
            json!({ "items": items }),
            ids,
            &overrides,
            inp.seed,
        )
    };
    let answers = client
        .batches(&all_ids, s.completion.batch_size, &make, &no_check)
        .await?;
    let mut current: Vec<Identity> = answers
        .iter()
        .map(|a| Identity {
            name: text(a, "name"),
            email: text(a, "email"),
            phone_number: text(a, "phone_number"),
            government_id: text(a, "government_id"),
        })
        .collect();
    let mut provenance: Vec<BTreeMap<String, String>> = (0..n)
        .map(|_| {
            FIELDS
                .iter()
                .map(|f| (f.to_string(), "llm".to_string()))
                .collect()
        })
        .collect();
    let mut audited: HashMap<(usize, String), Option<String>> = HashMap::new();

    let mut first = true;
    let mut round = 0;
    loop {
        let (mut problems, evidence) = all_problems(&inp, &dobs, &current);
        // Government-identifier audit of identifiers that passed the deterministic checks.
        let to_audit: Vec<usize> = (0..n)
            .filter(|&i| !problems[i].iter().any(|p| p.field == "government_id"))
            .filter(|&i| !audited.contains_key(&(i, current[i].government_id.clone())))
            .filter(|&i| provenance[i]["government_id"] != "fallback")
            .collect();
        if !to_audit.is_empty() {
            let ids: Vec<String> = to_audit
                .iter()
                .map(|&i| format!("{}#{}", inp.people[i].candidate_id, round))
                .collect();
            let items: HashMap<String, Value> = to_audit
                .iter()
                .zip(&ids)
                .map(|(&i, id)| {
                    let mut v = view(inp.people[i], dobs[i], &docs[i]);
                    v["id"] = json!(id);
                    v["name"] = json!(current[i].name);
                    v["government_id"] = json!(current[i].government_id);
                    v["decoded_evidence"] =
                        serde_json::to_value(&evidence[i]).unwrap_or(Value::Null);
                    (id.clone(), v)
                })
                .collect();
            let make_audit = |ids: &[String]| -> Result<LlmRequest> {
                let list: Vec<Value> = ids.iter().map(|id| items[id].clone()).collect();
                request(
                    &t.audit,
                    s.audit,
                    "items",
                    json!({ "items": list }),
                    ids,
                    &[],
                    inp.seed,
                )
            };
            let verdicts = client
                .batches(&ids, s.audit.batch_size, &make_audit, &no_check)
                .await?;
            report.govid_audit_requests += verdicts.len();
            for (v, &i) in verdicts.iter().zip(&to_audit) {
                let code = text(v, "reason_code");
                let reject = text(v, "decision") == "reject";
                if reject {
                    *report
                        .govid_audit_rejections
                        .entry(code.clone())
                        .or_default() += 1;
                } else {
                    report.govid_audit_accepted += 1;
                }
                audited.insert(
                    (i, current[i].government_id.clone()),
                    reject.then_some(code),
                );
            }
        }
        for i in 0..n {
            if let Some(Some(code)) = audited.get(&(i, current[i].government_id.clone())) {
                if !problems[i].iter().any(|p| p.field == "government_id") {
                    problems[i].push(FieldProblem {
                        field: "government_id".into(),
                        problem: format!("audit: {code}"),
                    });
                }
            }
        }
        for pr in problems.iter().flatten() {
            *report.problems.entry(kind(pr)).or_default() += 1;
            if first {
                if let Some(f) = report.fields.get_mut(&pr.field) {
                    f.initial_failures += 1;
                }
            }
        }
        first = false;
        let failing: Vec<(usize, FieldProblem)> = problems
            .into_iter()
            .enumerate()
            .flat_map(|(i, ps)| dedup_fields(ps).into_iter().map(move |p| (i, p)))
            .collect();
        if failing.is_empty() || round == s.max_repair_rounds {
            // Fallback for whatever still fails.
            for (i, pr) in &failing {
                fallback_field(&inp, *i, &pr.field, &dobs, &mut current, round)?;
                provenance[*i].insert(pr.field.clone(), "fallback".into());
            }
            break;
        }
        round += 1;
        report.repair_rounds = round;
        // 2. Repair: each failing field alone, with its rejection reason.
        let ids: Vec<String> = failing
            .iter()
            .map(|(i, p)| format!("{}:{}#{}", inp.people[*i].candidate_id, p.field, round))
            .collect();
        let items: HashMap<String, Value> = failing
            .iter()
            .zip(&ids)
            .map(|((i, p), id)| {
                let mut others = serde_json::to_value(&current[*i]).unwrap_or(Value::Null);
                if let Some(o) = others.as_object_mut() {
                    o.remove(&p.field);
                }
                let mut v = view(inp.people[*i], dobs[*i], &docs[*i]);
                v["id"] = json!(id);
                v["field"] = json!(p.field);
                v["rejected_value"] = json!(field_value(&current[*i], &p.field));
                v["problem"] = json!(p.problem);
                v["other_fields"] = others;
                (id.clone(), v)
            })
            .collect();
        for (_, p) in &failing {
            if let Some(f) = report.fields.get_mut(&p.field) {
                f.repair_requests += 1;
            }
        }
        let value_schema: HashMap<String, Value> = failing
            .iter()
            .zip(&ids)
            .map(|((i, p), id)| {
                let sch = field_schemas(&inp, inp.people[*i])
                    .remove(&p.field)
                    .unwrap_or(json!({"type": "string", "minLength": 1}));
                (id.clone(), sch)
            })
            .collect();
        let make_repair = |ids: &[String]| -> Result<LlmRequest> {
            let list: Vec<Value> = ids.iter().map(|id| items[id].clone()).collect();
            let overrides: Vec<serde_json::Map<String, Value>> = if inp.syntax_hints {
                ids.iter()
                    .map(|id| {
                        [("value".to_string(), value_schema[id].clone())]
                            .into_iter()
                            .collect()
                    })
                    .collect()
            } else {
                Vec::new()
            };
            request(
                &t.repair,
                s.repair,
                "items",
                json!({ "items": list }),
                ids,
                &overrides,
                inp.seed,
            )
        };
        let fixes = client
            .batches(&ids, s.repair.batch_size, &make_repair, &no_check)
            .await?;
        for (fix, (i, p)) in fixes.iter().zip(&failing) {
            set_field(&mut current[*i], &p.field, text(fix, "value"));
            provenance[*i].insert(p.field.clone(), "llm_repaired".into());
        }
    }

    // Final: every profile must pass every check.
    let (problems, evidence) = all_problems(&inp, &dobs, &current);
    if let Some((i, ps)) = problems.iter().enumerate().find(|(_, ps)| !ps.is_empty()) {
        bail!(
            "identity completion: profile {} still fails after fallback: {ps:?}",
            inp.people[i].candidate_id
        );
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        for (f, how) in &provenance[i] {
            let r = report.fields.get_mut(f).expect("known field");
            match how.as_str() {
                "llm" => r.llm += 1,
                "llm_repaired" => r.llm_repaired += 1,
                _ => r.fallback += 1,
            }
        }
        out.push(CompletedIdentity {
            candidate_id: inp.people[i].candidate_id.clone(),
            date_of_birth: dobs[i],
            identity: current[i].clone(),
            government_id_document: docs[i].clone(),
            provenance: provenance[i].clone(),
            government_id_evidence: evidence[i].clone(),
        });
    }
    Ok((out, report))
}

/// Layout hints for each identity field of a person (see `identity::*_schema`); none when
/// the stage runs without hints.
fn field_schemas(inp: &Input, p: &Person) -> BTreeMap<String, Value> {
    if !inp.syntax_hints {
        return BTreeMap::new();
    }
    let home = inp
        .tax
        .country_by_name(&p.current_country)
        .map(|c| c.iso2.clone())
        .unwrap_or_default();
    let cit = inp
        .tax
        .country_by_name(&p.citizenship)
        .map(|c| c.iso3.clone())
        .unwrap_or_default();
    let mut m = BTreeMap::new();
    m.insert("name".to_string(), identity::name_schema());
    m.insert("email".to_string(), identity::email_schema());
    m.insert("phone_number".to_string(), identity::phone_schema(&home));
    m.insert(
        "government_id".to_string(),
        identity::government_id_schema(&cit),
    );
    m
}

/// One problem per field (the first), in field order.
fn dedup_fields(ps: Vec<FieldProblem>) -> Vec<FieldProblem> {
    let mut out: Vec<FieldProblem> = Vec::new();
    for f in FIELDS {
        if let Some(p) = ps.iter().find(|p| p.field == f) {
            out.push(p.clone());
        }
    }
    out
}

pub fn field_value(id: &Identity, f: &str) -> String {
    match f {
        "name" => id.name.clone(),
        "email" => id.email.clone(),
        "phone_number" => id.phone_number.clone(),
        _ => id.government_id.clone(),
    }
}

fn set_field(id: &mut Identity, f: &str, v: String) {
    match f {
        "name" => id.name = v,
        "email" => id.email = v,
        "phone_number" => id.phone_number = v,
        _ => id.government_id = v,
    }
}

/// Replaces one field by a value valid by construction, unique among all profiles.
fn fallback_field(
    inp: &Input,
    i: usize,
    field: &str,
    dobs: &[Date],
    current: &mut [Identity],
    round: usize,
) -> Result<()> {
    let p = inp.people[i];
    for attempt in 0..50u32 {
        let mut r = rng(
            inp.seed,
            "identity-fallback",
            &format!("{}/{field}/{round}/{attempt}", p.candidate_id),
        );
        let full = identity::fallback(
            inp.tax,
            inp.cities,
            inp.names,
            p,
            dobs[i],
            (i as u32) * 100 + attempt,
            &mut r,
        )
        .ok_or_else(|| {
            anyhow!(
                "no fallback identity for {} ({})",
                p.candidate_id,
                p.citizenship
            )
        })?;
        let mut candidate = current[i].clone();
        match field {
            "name" => candidate.name = full.name,
            "email" => {
                candidate.email = email::from_name(
                    &candidate.name,
                    "",
                    (i as u32) * 100 + attempt,
                    email::DOMAINS[i % 3],
                )
            }
            "phone_number" => candidate.phone_number = full.phone_number,
            _ => candidate.government_id = full.government_id,
        }
        let clash = current.iter().enumerate().any(|(j, o)| {
            j != i
                && match field {
                    "email" => email::unique_key(&o.email) == email::unique_key(&candidate.email),
                    "phone_number" => o.phone_number == candidate.phone_number,
                    "government_id" => o.government_id == candidate.government_id,
                    _ => false,
                }
        });
        let h = Holder {
            person: p,
            date_of_birth: dobs[i],
            reference: inp.reference,
        };
        let ok = identity::validate(inp.tax, &h, &candidate)
            .0
            .iter()
            .all(|pr| pr.field != field);
        if ok && !clash {
            current[i] = candidate;
            return Ok(());
        }
    }
    bail!(
        "no valid unique fallback {field} for {} after 50 attempts",
        p.candidate_id
    )
}
