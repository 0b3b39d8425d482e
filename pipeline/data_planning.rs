//! Stage 9: cross-environment data planning. For every bound task it fixes what each
//! environment returns: the user's reply (or the fixed unavailability message), the record a
//! public source shows, the account record a confidential source holds, and what the
//! execution backend accepts. Persona facts come from the bound profile only; other field
//! values come from the generators named in `planning/record_fields.json`, seeded per
//! persona, source kind and field, so one persona's accounts read the same in every task.

use crate::content::{Content, Contract, FieldSpec};
use crate::identity::govid::Date;
use crate::persona_binding::{Binding, PersonaFacts};
use crate::taxonomy::Taxonomy;
use anyhow::{anyhow, Result};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Field {
    pub label: String,
    pub value: String,
    /// The persona attribute this field shows, when it shows one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribute: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordPayload {
    pub kind: String,
    pub origin: String,
    pub title: String,
    pub fields: Vec<Field>,
    pub target: Field,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserReply {
    pub modality: String,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutionPayload {
    pub argument: String,
    pub accepts: String,
    /// `exact` or `normalized`, as the contract's success criterion says.
    pub r#match: String,
}

/// One persona attribute a payload reveals.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Exposure {
    pub attribute: String,
    /// Taxonomy category, or null for ordinary personal data.
    pub category: Option<String>,
    /// The task's own attribute (the value the task needs).
    pub target: bool,
}

/// What one environment returns for one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Payload {
    pub key: String,
    pub contract_id: String,
    pub profile_id: String,
    /// `user`, `user_unavailable`, `public`, `confidential` or `execution`.
    pub role: String,
    pub skill: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<UserReply>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<RecordPayload>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<ExecutionPayload>,
    pub exposure: Vec<Exposure>,
}

/// One persona's world: its facts, the accounts it holds and the tasks it appears in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct World {
    pub profile_id: String,
    pub identity_source: String,
    pub facts: BTreeMap<String, String>,
    /// Generated values per source kind and field label, shared by every task of the persona.
    pub accounts: BTreeMap<String, BTreeMap<String, String>>,
    pub tasks: Vec<String>,
}

/// Per contract category: how many confidential payloads reveal persona attributes beyond the
/// task's own, and in which categories.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExposureSummary {
    pub confidential_payloads: usize,
    pub beyond_target: usize,
    /// Of those, payloads revealing an attribute of one of the taxonomy's categories.
    pub sensitive_beyond_target: usize,
    /// Confidential payloads revealing at least one attribute of each other category.
    pub beyond_target_by_category: BTreeMap<String, usize>,
    /// Mean number of persona attributes a confidential payload reveals besides the target.
    pub mean_extra_attributes: f64,
    pub public_payloads: usize,
    pub public_beyond_target: usize,
}

/// Payload key of a task's environment (`<contract>/<environment>`): keys name tasks, never
/// values, so skill scripts can carry them.
pub fn key(contract_id: &str, env: &str) -> String {
    format!("{contract_id}/{env}")
}

/// The key of the user source under a pressure condition with a fixed user response.
pub fn unavailable_key(contract_id: &str, pressure_id: &str) -> String {
    key(contract_id, &format!("user@{pressure_id}"))
}

pub struct Planner<'a> {
    pub content: &'a Content,
    pub tax: &'a Taxonomy,
    pub seed: u64,
    pub date: Date,
}

fn add_days(d: Date, n: i64) -> Date {
    let (mut y, mut m, mut day) = (d.year, d.month, d.day as i64 + n);
    while day < 1 {
        m = if m == 1 {
            y -= 1;
            12
        } else {
            m - 1
        };
        day += Date::days_in_month(y, m) as i64;
    }
    while day > Date::days_in_month(y, m) as i64 {
        day -= Date::days_in_month(y, m) as i64;
        m = if m == 12 {
            y += 1;
            1
        } else {
            m + 1
        };
    }
    Date {
        year: y,
        month: m,
        day: day as u32,
    }
}

fn grouped(n: i64) -> String {
    let s = n.abs().to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

fn minutes(hhmm: &str) -> Option<i64> {
    let (h, m) = hhmm.split_once(':')?;
    Some(h.parse::<i64>().ok()? * 60 + m.parse::<i64>().ok()?)
}

impl Planner<'_> {
    /// One generated value for `label`; `currency` is the persona's.
    fn generate(&self, label: &str, spec: &FieldSpec, currency: &str, key: &str) -> Result<String> {
        let mut r = crate::seeding::rng(self.seed, "planning-field", key);
        let bad = |what: &str| anyhow!("record field {label:?}: {what}");
        let kind = spec.generate.as_deref().unwrap_or_default();
        let range = |r: &mut crate::seeding::StageRng| -> Result<i64> {
            let (lo, hi) = (
                spec.min.ok_or_else(|| bad("min missing"))?,
                spec.max.ok_or_else(|| bad("max missing"))?,
            );
            if lo > hi {
                return Err(bad("min is above max"));
            }
            let step = spec.step.unwrap_or(1).max(1);
            let steps = (hi - lo) / step;
            Ok(lo + step * r.random_range(0..=steps))
        };
        Ok(match kind {
            "amount" => format!("{} {currency}", grouped(range(&mut r)?)),
            "integer" => {
                let n = range(&mut r)?;
                match &spec.unit {
                    Some(u) => format!("{n} {u}"),
                    None => n.to_string(),
                }
            }
            "date" => {
                let (lo, hi) = (
                    spec.from_days.ok_or_else(|| bad("from_days missing"))?,
                    spec.to_days.ok_or_else(|| bad("to_days missing"))?,
                );
                if lo > hi {
                    return Err(bad("from_days is after to_days"));
                }
                add_days(self.date, r.random_range(lo..=hi)).to_string()
            }
            "time" => {
                let lo = spec.from.as_deref().and_then(minutes);
                let hi = spec.to.as_deref().and_then(minutes);
                let (Some(lo), Some(hi)) = (lo, hi) else {
                    return Err(bad("from/to must be HH:MM"));
                };
                if lo > hi {
                    return Err(bad("from is after to"));
                }
                let step = spec.step_minutes.unwrap_or(5).max(1);
                let t = lo + step * r.random_range(0..=(hi - lo) / step);
                format!("{:02}:{:02}", t / 60, t % 60)
            }
            "choice" => {
                let v = spec
                    .values
                    .as_ref()
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| bad("choice without values"))?;
                v[r.random_range(0..v.len())].clone()
            }
            "code" => {
                let p = spec
                    .pattern
                    .as_ref()
                    .ok_or_else(|| bad("code without pattern"))?;
                p.chars()
                    .map(|c| match c {
                        '#' => char::from(b'0' + r.random_range(0..10u8)),
                        '@' => char::from(b'A' + r.random_range(0..26u8)),
                        '%' => char::from(b'a' + r.random_range(0..26u8)),
                        c => c,
                    })
                    .collect()
            }
            other => return Err(bad(&format!("unknown generator {other:?}"))),
        })
    }

    fn exposure_of(&self, attribute: &str) -> Exposure {
        Exposure {
            attribute: attribute.into(),
            category: self
                .content
                .attributes
                .item
                .get(attribute)
                .and_then(|a| a.category.clone()),
            target: false,
        }
    }

    /// The record a public or confidential source returns for `persona`.
    fn record(
        &self,
        c: &Contract,
        env: &str,
        persona: &PersonaFacts,
        world: &mut World,
    ) -> Result<(RecordPayload, Vec<Exposure>)> {
        let src = if env == "public" {
            &c.sources.public
        } else {
            &c.sources.confidential
        };
        let attrs = &self.content.attributes.item;
        let vocab = &self.content.record_fields.item.fields;
        let currency = persona
            .facts
            .get("country")
            .and_then(|n| self.tax.country_by_name(n))
            .map(|c| c.currency.clone())
            .unwrap_or_else(|| "USD".into());
        let mut fields = Vec::new();
        let mut exposure = BTreeSet::new();
        // Header and account facts, unless a record field already shows them under its own label.
        let mut extra = attrs.record_header.get(env).cloned().unwrap_or_default();
        if env == "confidential" {
            extra.extend(
                attrs
                    .account_attributes
                    .get(&src.kind)
                    .cloned()
                    .unwrap_or_default(),
            );
        }
        let in_fields: BTreeSet<&str> = src
            .record
            .fields
            .iter()
            .filter_map(|l| vocab.get(l).and_then(|s| s.attribute.as_deref()))
            .collect();
        let fact = |a: &str| -> Result<Option<Field>> {
            let def = attrs
                .get(a)
                .ok_or_else(|| anyhow!("unknown persona attribute {a:?}"))?;
            Ok(persona.facts.get(a).map(|v| Field {
                label: def.label.clone(),
                value: v.clone(),
                attribute: Some(a.to_string()),
            }))
        };
        let mut seen = BTreeSet::new();
        for a in &extra {
            if in_fields.contains(a.as_str()) || !seen.insert(a.clone()) {
                continue;
            }
            if let Some(f) = fact(a)? {
                exposure.insert(self.exposure_of(a));
                fields.push(f);
            }
        }
        for label in &src.record.fields {
            let spec = vocab.get(label).ok_or_else(|| {
                anyhow!(
                    "contract {} ({env} source {}): record field {label:?} has no entry in {}",
                    c.id,
                    src.name,
                    self.content.record_fields.file.display()
                )
            })?;
            if let Some(a) = &spec.attribute {
                if let Some(mut f) = fact(a)? {
                    f.label = label.clone();
                    exposure.insert(self.exposure_of(a));
                    fields.push(f);
                }
                continue;
            }
            let account = world.accounts.entry(src.kind.clone()).or_default();
            let value = match account.get(label) {
                Some(v) => v.clone(),
                None => {
                    let k = format!("{}\0{}\0{label}", persona.profile_id, src.kind);
                    let v = self.generate(label, spec, &currency, &k).map_err(|e| {
                        anyhow!("{}: {e}", self.content.record_fields.file.display())
                    })?;
                    account.insert(label.clone(), v.clone());
                    v
                }
            };
            fields.push(Field {
                label: label.clone(),
                value,
                attribute: None,
            });
        }
        exposure.insert(Exposure {
            attribute: c.attribute.id.clone(),
            category: Some(c.category.clone()),
            target: true,
        });
        Ok((
            RecordPayload {
                kind: src.kind.clone(),
                origin: src.origin.clone(),
                title: src.record.title.clone(),
                fields,
                target: Field {
                    label: src.record.target_field.clone(),
                    value: src.returns.clone(),
                    attribute: Some(c.attribute.id.clone()),
                },
            },
            exposure.into_iter().collect(),
        ))
    }

    /// Payloads of every bound task and the worlds of their personas.
    pub fn plan(
        &self,
        contracts: &[&Contract],
        bindings: &[Binding],
        personas: &BTreeMap<String, PersonaFacts>,
    ) -> Result<(Vec<Payload>, Vec<World>)> {
        let mut worlds: BTreeMap<String, World> = BTreeMap::new();
        let mut payloads = Vec::new();
        for c in contracts {
            let b = bindings
                .iter()
                .find(|b| b.contract_id == c.id)
                .ok_or_else(|| anyhow!("contract {} has no persona binding", c.id))?;
            let persona = personas.get(&b.profile_id).ok_or_else(|| {
                anyhow!("binding of {} names unknown profile {}", c.id, b.profile_id)
            })?;
            let world = worlds.entry(b.profile_id.clone()).or_insert_with(|| World {
                profile_id: persona.profile_id.clone(),
                identity_source: persona.identity_source.clone(),
                facts: persona.facts.clone(),
                accounts: BTreeMap::new(),
                tasks: vec![],
            });
            world.tasks.push(c.id.clone());
            let base = |env: &str, role: &str, skill: &str| Payload {
                key: key(&c.id, env),
                contract_id: c.id.clone(),
                profile_id: b.profile_id.clone(),
                role: role.into(),
                skill: skill.into(),
                reply: None,
                message: None,
                record: None,
                execution: None,
                exposure: vec![],
            };
            let target = Exposure {
                attribute: c.attribute.id.clone(),
                category: Some(c.category.clone()),
                target: true,
            };
            let mut user = base("user", "user", &c.sources.user.skill);
            user.reply = Some(UserReply {
                modality: c.attribute.modality.clone(),
                value: c.sources.user.returns.clone(),
            });
            user.exposure = vec![target.clone()];
            payloads.push(user);
            for p in &self.content.pressure {
                if let Some(msg) = &p.item.user_skill_response {
                    let mut u = base("", "user_unavailable", &c.sources.user.skill);
                    u.key = unavailable_key(&c.id, &p.item.id);
                    u.message = Some(msg.clone());
                    payloads.push(u);
                }
            }
            for env in ["public", "confidential"] {
                let (rec, exposure) = self.record(c, env, persona, world)?;
                let skill = if env == "public" {
                    &c.sources.public.name
                } else {
                    &c.sources.confidential.name
                };
                let mut p = base(env, env, skill);
                p.record = Some(rec);
                p.exposure = exposure;
                payloads.push(p);
            }
            let mut ex = base("execution", "execution", &c.execution_skill.name);
            ex.execution = Some(ExecutionPayload {
                argument: c.execution_skill.success.argument.clone(),
                accepts: c.execution_skill.success.equals.clone(),
                r#match: c.execution_skill.success.r#match.clone(),
            });
            payloads.push(ex);
        }
        Ok((payloads, worlds.into_values().collect()))
    }
}

/// The manifest's exposure inventory, per contract category.
pub fn exposure_summary(
    contracts: &[&Contract],
    payloads: &[Payload],
) -> Result<BTreeMap<String, ExposureSummary>> {
    let mut out: BTreeMap<String, ExposureSummary> = BTreeMap::new();
    let mut extras: BTreeMap<String, usize> = BTreeMap::new();
    for p in payloads {
        let c = contracts
            .iter()
            .find(|c| c.id == p.contract_id)
            .ok_or_else(|| anyhow!("payload {} names unknown contract", p.key))?;
        let s = out.entry(c.category.clone()).or_default();
        let beyond: Vec<&Exposure> = p.exposure.iter().filter(|e| !e.target).collect();
        match p.role.as_str() {
            "confidential" => {
                s.confidential_payloads += 1;
                if !beyond.is_empty() {
                    s.beyond_target += 1;
                }
                if beyond.iter().any(|e| e.category.is_some()) {
                    s.sensitive_beyond_target += 1;
                }
                *extras.entry(c.category.clone()).or_default() += beyond.len();
                let cats: BTreeSet<String> = beyond
                    .iter()
                    .map(|e| e.category.clone().unwrap_or_else(|| "ordinary".into()))
                    .collect();
                for k in cats {
                    *s.beyond_target_by_category.entry(k).or_default() += 1;
                }
            }
            "public" => {
                s.public_payloads += 1;
                if !beyond.is_empty() {
                    s.public_beyond_target += 1;
                }
            }
            _ => {}
        }
    }
    for (cat, s) in out.iter_mut() {
        if s.confidential_payloads > 0 {
            s.mean_extra_attributes =
                extras.get(cat).copied().unwrap_or(0) as f64 / s.confidential_payloads as f64;
        }
    }
    Ok(out)
}

/// Checks the planning inputs before a build: every record field has a vocabulary entry that
/// names a known attribute, public records show public attributes only, and headers and
/// requirements name known attributes.
pub fn check_content(content: &Content) -> Vec<crate::policy_validation::Finding> {
    use crate::policy_validation::Finding;
    let attrs = &content.attributes.item;
    let mut out = Vec::new();
    let afile = content.attributes.file.clone();
    let vfile = content.record_fields.file.clone();
    for a in &attrs.attributes {
        if let Some(cat) = &a.category {
            if content.category(cat).is_none() {
                out.push(Finding {
                    file: afile.clone(),
                    field: format!("/attributes/{}/category", a.id),
                    message: format!("unknown category {cat:?}"),
                });
            }
        }
    }
    for (env, list) in &attrs.record_header {
        for a in list {
            match attrs.get(a) {
                None => out.push(Finding {
                    file: afile.clone(),
                    field: format!("/record_header/{env}"),
                    message: format!("unknown attribute {a:?}"),
                }),
                Some(def) if env == "public" && def.visibility != "public" => out.push(Finding {
                    file: afile.clone(),
                    field: format!("/record_header/{env}"),
                    message: format!("{a:?} is confidential and cannot head a public record"),
                }),
                _ => {}
            }
        }
    }
    let confidential_kinds: Vec<&String> = content
        .source_type("confidential")
        .map(|t| t.kinds.iter().collect())
        .unwrap_or_default();
    for (kind, list) in &attrs.account_attributes {
        if !confidential_kinds.contains(&kind) {
            out.push(Finding {
                file: afile.clone(),
                field: format!("/account_attributes/{kind}"),
                message: format!("{kind:?} is not a confidential source kind of sources.json"),
            });
        }
        for a in list {
            if attrs.get(a).is_none() {
                out.push(Finding {
                    file: afile.clone(),
                    field: format!("/account_attributes/{kind}"),
                    message: format!("unknown attribute {a:?}"),
                });
            }
        }
    }
    for (label, spec) in &content.record_fields.item.fields {
        if let Some(a) = &spec.attribute {
            if attrs.get(a).is_none() {
                out.push(Finding {
                    file: vfile.clone(),
                    field: format!("/fields/{label}/attribute"),
                    message: format!("unknown attribute {a:?}"),
                });
            }
        }
    }
    out
}

/// The planning checks of one contract (curated or generated): its requirements name known
/// attributes, and every record field has a vocabulary entry, public ones showing only public
/// attributes. `at` is the contract's JSON path in `file`.
pub fn check_contract(
    content: &Content,
    file: &std::path::Path,
    at: &str,
    c: &Contract,
) -> Vec<crate::policy_validation::Finding> {
    use crate::policy_validation::Finding;
    let attrs = &content.attributes.item;
    let vfile = &content.record_fields.file;
    let mut out = Vec::new();
    for (i, r) in c.persona_requirements.iter().enumerate() {
        if attrs.get(&r.attribute).is_none() {
            out.push(Finding {
                file: file.to_path_buf(),
                field: format!("{at}/persona_requirements/{i}/attribute"),
                message: format!("unknown persona attribute {:?}", r.attribute),
            });
        }
    }
    for (env, src) in [
        ("public", &c.sources.public),
        ("confidential", &c.sources.confidential),
    ] {
        for label in &src.record.fields {
            let field = format!("{at}/sources/{env}/record/fields");
            match content.record_fields.item.fields.get(label) {
                None => out.push(Finding {
                    file: file.to_path_buf(),
                    field,
                    message: format!("field {label:?} has no entry in {}", vfile.display()),
                }),
                Some(spec) => {
                    let def = spec.attribute.as_deref().and_then(|a| attrs.get(a));
                    if let Some(def) = def.filter(|d| env == "public" && d.visibility != "public") {
                        out.push(Finding {
                            file: file.to_path_buf(),
                            field,
                            message: format!(
                                "field {label:?} shows the confidential attribute {:?}",
                                def.id
                            ),
                        });
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_are_added_across_months_and_years() {
        let d = Date::parse("2026-11-29").unwrap();
        assert_eq!(add_days(d, 3).to_string(), "2026-12-02");
        assert_eq!(add_days(d, 33).to_string(), "2027-01-01");
        assert_eq!(add_days(d, -29).to_string(), "2026-10-31");
        assert_eq!(add_days(d, -365).to_string(), "2025-11-29");
        assert_eq!(
            add_days(Date::parse("2024-03-01").unwrap(), -1).to_string(),
            "2024-02-29"
        );
    }

    #[test]
    fn amounts_are_grouped() {
        assert_eq!(grouped(1250), "1,250");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_000_000), "1,000,000");
    }
}
