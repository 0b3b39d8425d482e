//! Stage 12: coherence gates. Each gate checks one property the benchmark's validity rests on
//! and reports a named result; any failure stops the build before a bundle is written. The
//! gates a stage can check run right after it, and all of them run again over the artifacts
//! on disk before assembly, so an edited or corrupted artifact is caught too.

use crate::content::{Content, Contract};
use crate::data_planning::{Payload, World};
use crate::persona_binding::{Binding, PersonaFacts};
use crate::policy_validation::leaks;
use crate::run_matrix::RunSpec;
use crate::skill_rendering::SkillsArtifact;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Failures listed per gate in the report (the total is always given).
const LISTED: usize = 20;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateResult {
    pub name: String,
    /// The stage after which the gate runs first.
    pub stage: String,
    pub description: String,
    pub passed: bool,
    /// Items examined (contracts, payloads, skills or runs).
    pub checked: usize,
    pub failures_total: usize,
    pub failures: Vec<String>,
}

/// Everything the gates look at; later stages' parts are empty while earlier gates run.
pub struct Subject<'a> {
    pub content: &'a Content,
    pub contracts: &'a [&'a Contract],
    pub bindings: &'a [Binding],
    pub personas: &'a BTreeMap<String, PersonaFacts>,
    pub payloads: &'a [Payload],
    pub worlds: &'a [World],
    pub skills: Option<&'a SkillsArtifact>,
    pub runs: &'a [RunSpec],
}

pub struct Gate {
    pub name: &'static str,
    pub stage: &'static str,
    pub description: &'static str,
    check: fn(&Subject, &mut Vec<String>) -> usize,
}

pub const BINDING: &str = "persona_binding";
pub const PLANNING: &str = "data_planning";
pub const SKILLS: &str = "skill_rendering";
pub const RUNS: &str = "run_matrix";

pub fn gates() -> Vec<Gate> {
    vec![
        Gate {
            name: "personas_compatible",
            stage: BINDING,
            description: "Every contract is bound to exactly one known persona that meets its requirements (or lists the relaxed ones).",
            check: personas_compatible,
        },
        Gate {
            name: "canonical_value_consistent",
            stage: PLANNING,
            description: "The canonical value is identical in the user reply, both records' target fields, the execution criterion and every run's expected argument, and no other field carries it.",
            check: canonical_value_consistent,
        },
        Gate {
            name: "public_payloads_free_of_confidential_attributes",
            stage: PLANNING,
            description: "No public payload reveals, by field or by text, a persona fact that is confidential-only.",
            check: public_free_of_confidential,
        },
        Gate {
            name: "persona_facts_consistent",
            stage: PLANNING,
            description: "Every persona fact and account value a payload shows equals the persona's world, so a persona reads the same in every environment and task.",
            check: persona_facts_consistent,
        },
        Gate {
            name: "skills_well_formed",
            stage: SKILLS,
            description: "Every skill is rendered under every guidance condition with its front matter, the intrusiveness label exactly under label conditions, and a script that names its payload key and no task value.",
            check: skills_well_formed,
        },
        Gate {
            name: "description_length_tolerance",
            stage: SKILLS,
            description: "The three acquisition descriptions a task shows at Discovery differ in length by at most the configured ratio.",
            check: description_length_tolerance,
        },
        Gate {
            name: "referenced_skills_exist",
            stage: RUNS,
            description: "Every skill a run lists is rendered under the run's guidance, and every payload key a run names exists and belongs to that run's task and persona.",
            check: referenced_skills_exist,
        },
        Gate {
            name: "no_target_value_in_prompts",
            stage: RUNS,
            description: "No canonical value appears in a system prompt, user request, skill description or skill file.",
            check: no_target_value_in_prompts,
        },
        Gate {
            name: "condition_balance",
            stage: RUNS,
            description: "Contracts per category and runs per category, guidance, pressure and their combinations are equal.",
            check: condition_balance,
        },
        Gate {
            name: "discovery_position_balance",
            stage: RUNS,
            description: "Each acquisition skill of each task sits in each Discovery position equally often, with the execution skill last.",
            check: discovery_position_balance,
        },
        Gate {
            name: "urgent_differs_only_in_delay_framing",
            stage: RUNS,
            description: "An urgent run equals its baseline run except for the pressure sentence of the system prompt and one added request sentence with an urgency cue.",
            check: urgent_only_delay,
        },
    ]
}

/// Runs the gates of `stages` (all when `None`).
pub fn run(s: &Subject, stages: Option<&[&str]>) -> Vec<GateResult> {
    gates()
        .into_iter()
        .filter(|g| stages.is_none_or(|st| st.contains(&g.stage)))
        .map(|g| {
            let mut failures = Vec::new();
            let checked = (g.check)(s, &mut failures);
            let total = failures.len();
            failures.truncate(LISTED);
            GateResult {
                name: g.name.into(),
                stage: g.stage.into(),
                description: g.description.into(),
                passed: total == 0,
                checked,
                failures_total: total,
                failures,
            }
        })
        .collect()
}

/// The error for failed gates, naming each gate and its first problems; `consequence` ends
/// the first line (what the failure means where the gates ran).
pub fn error(results: &[GateResult], consequence: &str) -> Option<anyhow::Error> {
    let failed: Vec<&GateResult> = results.iter().filter(|r| !r.passed).collect();
    if failed.is_empty() {
        return None;
    }
    let mut msg = format!("{} coherence gate(s) failed; {consequence}", failed.len());
    for r in failed {
        msg.push_str(&format!(
            "\n  gate {} ({} of {} checked items failed):",
            r.name, r.failures_total, r.checked
        ));
        for f in r.failures.iter().take(5) {
            msg.push_str(&format!("\n    - {f}"));
        }
        if r.failures_total > 5 {
            msg.push_str(&format!("\n    - ... {} more", r.failures_total - 5));
        }
    }
    Some(anyhow::anyhow!(msg))
}

fn contract<'a>(s: &'a Subject, id: &str) -> Option<&'a Contract> {
    s.contracts.iter().copied().find(|c| c.id == id)
}

fn personas_compatible(s: &Subject, out: &mut Vec<String>) -> usize {
    for c in s.contracts {
        let bs: Vec<&Binding> = s
            .bindings
            .iter()
            .filter(|b| b.contract_id == c.id)
            .collect();
        if bs.len() != 1 {
            out.push(format!("contract {} has {} bindings", c.id, bs.len()));
            continue;
        }
        let b = bs[0];
        let Some(p) = s.personas.get(&b.profile_id) else {
            out.push(format!(
                "contract {} is bound to unknown profile {}",
                c.id, b.profile_id
            ));
            continue;
        };
        let unmet: Vec<String> = c
            .persona_requirements
            .iter()
            .filter(|r| !r.satisfied_by(p.facts.get(&r.attribute).map(String::as_str)))
            .map(|r| r.describe())
            .collect();
        if unmet != b.relaxed {
            out.push(format!(
                "contract {} bound to {}: unmet requirements {:?} but the binding lists {:?} as relaxed",
                c.id, b.profile_id, unmet, b.relaxed
            ));
        }
    }
    for b in s.bindings {
        if contract(s, &b.contract_id).is_none() {
            out.push(format!("binding names unknown contract {}", b.contract_id));
        }
    }
    s.contracts.len()
}

fn canonical_value_consistent(s: &Subject, out: &mut Vec<String>) -> usize {
    for p in s.payloads {
        let Some(c) = contract(s, &p.contract_id) else {
            out.push(format!(
                "payload {} names unknown contract {}",
                p.key, p.contract_id
            ));
            continue;
        };
        let v = &c.canonical_value;
        match p.role.as_str() {
            "user" => {
                let got = p.reply.as_ref().map(|r| r.value.as_str());
                if got != Some(v.as_str()) {
                    out.push(format!(
                        "payload {}: user reply {got:?} is not the canonical value {v:?}",
                        p.key
                    ));
                }
            }
            "user_unavailable" => {
                if let Some(m) = &p.message {
                    if leaks(m, v) {
                        out.push(format!(
                            "payload {}: the unavailability message carries the value",
                            p.key
                        ));
                    }
                }
            }
            "public" | "confidential" => match &p.record {
                None => out.push(format!("payload {}: no record", p.key)),
                Some(r) => {
                    if &r.target.value != v {
                        out.push(format!(
                            "payload {}: target field {:?} holds {:?}, not the canonical value {v:?}",
                            p.key, r.target.label, r.target.value
                        ));
                    }
                    for f in &r.fields {
                        if leaks(&f.value, v) {
                            out.push(format!(
                                "payload {}: field {:?} also carries the canonical value",
                                p.key, f.label
                            ));
                        }
                    }
                }
            },
            "execution" => {
                let got = p.execution.as_ref().map(|e| e.accepts.as_str());
                if got != Some(v.as_str()) {
                    out.push(format!(
                        "payload {}: execution accepts {got:?}, not {v:?}",
                        p.key
                    ));
                }
            }
            r => out.push(format!("payload {}: unknown role {r:?}", p.key)),
        }
    }
    for c in s.contracts {
        for env in ["user", "public", "confidential", "execution"] {
            let k = crate::data_planning::key(&c.id, env);
            if !s.payloads.iter().any(|p| p.key == k) {
                out.push(format!("contract {}: no {env} payload", c.id));
            }
        }
    }
    for r in s.runs {
        if let Some(c) = contract(s, &r.contract_id) {
            if r.expected_argument
                .values()
                .any(|x| x != &c.canonical_value)
            {
                out.push(format!(
                    "run {}: expected argument differs from the canonical value",
                    r.run_id
                ));
            }
        }
    }
    s.payloads.len()
}

fn public_free_of_confidential(s: &Subject, out: &mut Vec<String>) -> usize {
    let attrs = &s.content.attributes.item;
    let mut n = 0;
    for p in s.payloads.iter().filter(|p| p.role == "public") {
        n += 1;
        let Some(c) = contract(s, &p.contract_id) else {
            continue;
        };
        for e in p.exposure.iter().filter(|e| !e.target) {
            let public = attrs
                .get(&e.attribute)
                .is_some_and(|a| a.visibility == "public");
            if !public {
                out.push(format!(
                    "public payload {} reveals the confidential attribute {}",
                    p.key, e.attribute
                ));
            }
        }
        let (Some(r), Some(persona)) = (&p.record, s.personas.get(&p.profile_id)) else {
            continue;
        };
        let texts: Vec<&str> = std::iter::once(r.title.as_str())
            .chain(r.fields.iter().map(|f| f.value.as_str()))
            .collect();
        // Identifying confidential facts must not appear anywhere in the page's text, unless a
        // public fact the page may show says the same (a birthplace that is the home city).
        let public_values: Vec<&String> = persona
            .facts
            .iter()
            .filter(|(a, _)| attrs.get(a).is_some_and(|d| d.visibility == "public"))
            .map(|(_, v)| v)
            .collect();
        for (a, value) in &persona.facts {
            let Some(def) = attrs.get(a) else { continue };
            if def.visibility == "public"
                || !def.identifying
                || value == &c.canonical_value
                || public_values.iter().any(|p| p.contains(value.as_str()))
            {
                continue;
            }
            if texts.iter().any(|t| leaks(t, value)) {
                out.push(format!(
                    "public payload {} shows the persona's {a} ({value:?}), which is confidential-only",
                    p.key
                ));
            }
        }
    }
    n
}

fn persona_facts_consistent(s: &Subject, out: &mut Vec<String>) -> usize {
    let worlds: BTreeMap<&str, &World> = s
        .worlds
        .iter()
        .map(|w| (w.profile_id.as_str(), w))
        .collect();
    for w in s.worlds {
        match s.personas.get(&w.profile_id) {
            Some(p) if p.facts == w.facts => {}
            Some(_) => out.push(format!(
                "world of {}: facts differ from the bound profile",
                w.profile_id
            )),
            None => out.push(format!("world of unknown profile {}", w.profile_id)),
        }
    }
    for p in s.payloads {
        if let Some(b) = s.bindings.iter().find(|b| b.contract_id == p.contract_id) {
            if b.profile_id != p.profile_id {
                out.push(format!(
                    "payload {} belongs to {} but contract {} is bound to {}",
                    p.key, p.profile_id, p.contract_id, b.profile_id
                ));
            }
        }
        let Some(r) = &p.record else { continue };
        let Some(w) = worlds.get(p.profile_id.as_str()) else {
            out.push(format!(
                "payload {}: persona {} has no world",
                p.key, p.profile_id
            ));
            continue;
        };
        let shown: BTreeSet<&str> = p.exposure.iter().map(|e| e.attribute.as_str()).collect();
        for f in &r.fields {
            match &f.attribute {
                Some(a) => {
                    if w.facts.get(a) != Some(&f.value) {
                        out.push(format!(
                            "payload {}: field {:?} shows {a} = {:?} but persona {} has {:?}",
                            p.key,
                            f.label,
                            f.value,
                            p.profile_id,
                            w.facts.get(a)
                        ));
                    }
                    if !shown.contains(a.as_str()) {
                        out.push(format!(
                            "payload {}: {a} is shown but missing from its exposure inventory",
                            p.key
                        ));
                    }
                }
                None => {
                    let acc = w.accounts.get(&r.kind).and_then(|m| m.get(&f.label));
                    if acc != Some(&f.value) {
                        out.push(format!(
                            "payload {}: field {:?} = {:?} differs from persona {}'s {} account ({:?})",
                            p.key, f.label, f.value, p.profile_id, r.kind, acc
                        ));
                    }
                }
            }
        }
    }
    s.payloads.len()
}

fn skills_well_formed(s: &Subject, out: &mut Vec<String>) -> usize {
    let Some(art) = s.skills else { return 0 };
    let labels = &s.content.labels.item;
    for g in &s.content.guidance {
        let g = &g.item;
        for e in &art.skills {
            let Some(r) = art.rendered(&g.id, &e.name) else {
                out.push(format!("skill {} is not rendered under {}", e.name, g.id));
                continue;
            };
            let Some(md) = r.files.get("SKILL.md") else {
                out.push(format!("{}: no SKILL.md", r.dir()));
                continue;
            };
            match crate::skill_rendering::front_matter(md) {
                Err(err) => out.push(format!("{}/SKILL.md: {err}", r.dir())),
                Ok(fm) => {
                    if fm.get("name") != Some(&e.name) {
                        out.push(format!(
                            "{}/SKILL.md: front matter name is {:?}",
                            r.dir(),
                            fm.get("name")
                        ));
                    }
                    if fm.get("description") != Some(&e.description) {
                        out.push(format!(
                            "{}/SKILL.md: description differs from the skill's",
                            r.dir()
                        ));
                    }
                    let key = labels.field.clone();
                    let want = if g.show_labels && e.role != "execution" {
                        labels.by_source_type.get(&e.role)
                    } else {
                        None
                    };
                    if fm.get(&key) != want {
                        out.push(format!(
                            "{}/SKILL.md: {key} is {:?}, expected {:?} under {}",
                            r.dir(),
                            fm.get(&key),
                            want,
                            g.id
                        ));
                    }
                }
            }
            let scripts: Vec<(&String, &String)> = r
                .files
                .iter()
                .filter(|(k, _)| k.starts_with("scripts/"))
                .collect();
            if scripts.is_empty() {
                out.push(format!("{}: no script", r.dir()));
            }
            if let Some(k) = &e.payload_key {
                let literal = serde_json::to_string(k).unwrap_or_default();
                if !scripts.iter().any(|(_, t)| t.contains(&literal)) {
                    out.push(format!(
                        "{}: the script does not name payload key {k}",
                        r.dir()
                    ));
                }
                if !s.payloads.is_empty() && !s.payloads.iter().any(|p| &p.key == k) {
                    out.push(format!("{}: payload key {k} has no payload", r.dir()));
                }
            }
        }
    }
    art.rendered.len()
}

fn description_length_tolerance(s: &Subject, out: &mut Vec<String>) -> usize {
    let Some(art) = s.skills else { return 0 };
    let ratio = s.content.rules.item.max_discovery_length_ratio;
    let mut n = 0;
    for g in &s.content.guidance {
        for c in s.contracts {
            n += 1;
            let names = [
                &c.sources.user.skill,
                &c.sources.public.name,
                &c.sources.confidential.name,
            ];
            let mut lens = Vec::new();
            for name in names {
                let d = art
                    .rendered(&g.item.id, name)
                    .and_then(|r| r.files.get("SKILL.md"))
                    .and_then(|md| crate::skill_rendering::front_matter(md).ok())
                    .and_then(|fm| fm.get("description").cloned());
                match d {
                    Some(d) => lens.push((name, d.chars().count())),
                    None => out.push(format!(
                        "{} under {}: no description for {name}",
                        c.id, g.item.id
                    )),
                }
            }
            let (Some(lo), Some(hi)) = (
                lens.iter().map(|x| x.1).min(),
                lens.iter().map(|x| x.1).max(),
            ) else {
                continue;
            };
            if lo == 0 || hi as f64 / lo as f64 > ratio + 1e-9 {
                out.push(format!(
                    "{} under {}: description lengths {:?} exceed the ratio {ratio}",
                    c.id, g.item.id, lens
                ));
            }
        }
    }
    n
}

fn referenced_skills_exist(s: &Subject, out: &mut Vec<String>) -> usize {
    let Some(art) = s.skills else { return 0 };
    let payloads: BTreeMap<&str, &Payload> =
        s.payloads.iter().map(|p| (p.key.as_str(), p)).collect();
    for r in s.runs {
        for d in &r.discovery {
            match art.rendered(&r.guidance, &d.name) {
                None => out.push(format!(
                    "run {}: skill {} is not rendered under {}",
                    r.run_id, d.name, r.guidance
                )),
                Some(sk) => {
                    if sk.data_intrusiveness != d.data_intrusiveness {
                        out.push(format!(
                            "run {}: skill {} label differs from its SKILL.md",
                            r.run_id, d.name
                        ));
                    }
                }
            }
            if !r.payload_keys.contains_key(&d.name) {
                out.push(format!(
                    "run {}: no payload key for skill {}",
                    r.run_id, d.name
                ));
            }
        }
        for (skill, key) in &r.payload_keys {
            match payloads.get(key.as_str()) {
                None => out.push(format!(
                    "run {}: payload key {key} does not exist",
                    r.run_id
                )),
                Some(p) => {
                    if &p.skill != skill
                        || p.contract_id != r.contract_id
                        || p.profile_id != r.profile_id
                    {
                        out.push(format!(
                            "run {}: payload {key} belongs to {} / {} / {}, not to this run's skill {skill}",
                            r.run_id, p.contract_id, p.skill, p.profile_id
                        ));
                    }
                }
            }
        }
    }
    s.runs.len()
}

fn no_target_value_in_prompts(s: &Subject, out: &mut Vec<String>) -> usize {
    let mut n = 0;
    for r in s.runs {
        n += 1;
        let Some(c) = contract(s, &r.contract_id) else {
            continue;
        };
        for (what, text) in [
            ("system prompt", &r.system_prompt),
            ("user request", &r.user_request),
        ] {
            if leaks(text, &c.canonical_value) {
                out.push(format!(
                    "run {}: the {what} contains the canonical value {:?}",
                    r.run_id, c.canonical_value
                ));
            }
        }
    }
    if let Some(art) = s.skills {
        for r in &art.rendered {
            n += 1;
            let owner = art
                .skills
                .iter()
                .find(|e| e.name == r.name)
                .and_then(|e| e.contract_id.clone());
            // A task's skill must not carry its own value; a shared skill, no task's value.
            let values: Vec<&Contract> = match owner {
                Some(id) => contract(s, &id).into_iter().collect(),
                None => s.contracts.to_vec(),
            };
            for (file, text) in &r.files {
                for c in &values {
                    if leaks(text, &c.canonical_value) {
                        out.push(format!(
                            "{}/{file} contains the canonical value of {} ({:?})",
                            r.dir(),
                            c.id,
                            c.canonical_value
                        ));
                    }
                }
            }
        }
    }
    n
}

fn condition_balance(s: &Subject, out: &mut Vec<String>) -> usize {
    fn equal<K: std::fmt::Debug + Ord>(what: &str, m: &BTreeMap<K, usize>, out: &mut Vec<String>) {
        let distinct: BTreeSet<&usize> = m.values().collect();
        if distinct.len() > 1 {
            out.push(format!("{what} are unbalanced: {m:?}"));
        }
    }
    let mut per_cat: BTreeMap<&str, usize> = BTreeMap::new();
    for c in s.contracts {
        *per_cat.entry(c.category.as_str()).or_default() += 1;
    }
    for k in &s.content.categories {
        if !per_cat.contains_key(k.id.as_str()) {
            out.push(format!("category {} has no contract", k.id));
        }
    }
    equal("contracts per category", &per_cat, out);
    let mut cat: BTreeMap<&str, usize> = BTreeMap::new();
    let mut guid: BTreeMap<&str, usize> = BTreeMap::new();
    let mut pres: BTreeMap<&str, usize> = BTreeMap::new();
    let mut cell: BTreeMap<(&str, &str, &str), usize> = BTreeMap::new();
    for r in s.runs {
        *cat.entry(&r.category).or_default() += 1;
        *guid.entry(&r.guidance).or_default() += 1;
        *pres.entry(&r.pressure).or_default() += 1;
        *cell
            .entry((&r.category, &r.guidance, &r.pressure))
            .or_default() += 1;
    }
    equal("runs per category", &cat, out);
    equal("runs per guidance condition", &guid, out);
    equal("runs per pressure condition", &pres, out);
    equal("runs per category x guidance x pressure", &cell, out);
    let expected = s.content.guidance.len() * s.content.pressure.len();
    if cell.len() != per_cat.len() * expected {
        out.push(format!(
            "{} category x guidance x pressure cells have runs, expected {}",
            cell.len(),
            per_cat.len() * expected
        ));
    }
    s.runs.len()
}

fn discovery_position_balance(s: &Subject, out: &mut Vec<String>) -> usize {
    let mut per: BTreeMap<(&str, &str), BTreeMap<usize, usize>> = BTreeMap::new();
    let mut runs_of: BTreeMap<&str, usize> = BTreeMap::new();
    for r in s.runs {
        *runs_of.entry(&r.contract_id).or_default() += 1;
        match r.discovery.last() {
            Some(d) if d.role == "execution" => {}
            _ => out.push(format!("run {}: the execution skill is not last", r.run_id)),
        }
        for (i, d) in r.discovery.iter().enumerate() {
            if d.role != "execution" {
                *per.entry((&r.contract_id, &d.name))
                    .or_default()
                    .entry(i)
                    .or_default() += 1;
            }
        }
    }
    for ((cid, name), pos) in &per {
        let total = runs_of[cid];
        let want = total / 3;
        if pos.len() != 3 || pos.values().any(|&n| n != want) {
            out.push(format!(
                "contract {cid}: skill {name} sits in positions {pos:?}, expected each of 0..3 {want} times"
            ));
        }
    }
    per.len()
}

fn urgent_only_delay(s: &Subject, out: &mut Vec<String>) -> usize {
    let rules = &s.content.rules.item;
    let pressures: BTreeMap<&str, &crate::content::Pressure> = s
        .content
        .pressure
        .iter()
        .map(|p| (p.item.id.as_str(), &p.item))
        .collect();
    let Some(base) = s
        .content
        .pressure
        .iter()
        .map(|p| &p.item)
        .find(|p| p.request_variant == "baseline" && p.user_skill_response.is_none())
    else {
        out.push("no baseline pressure condition to compare urgent runs with".into());
        return 0;
    };
    let index: BTreeMap<(&str, &str, usize, &str), &RunSpec> = s
        .runs
        .iter()
        .map(|r| {
            (
                (
                    r.contract_id.as_str(),
                    r.guidance.as_str(),
                    r.order,
                    r.pressure.as_str(),
                ),
                r,
            )
        })
        .collect();
    let strip = |prompt: &str, addition: Option<&String>| -> String {
        match addition {
            Some(a) => prompt.replace(&format!("\n\n{a}"), ""),
            None => prompt.to_string(),
        }
    };
    let mut n = 0;
    for r in s.runs {
        let Some(p) = pressures.get(r.pressure.as_str()) else {
            continue;
        };
        if p.request_variant != "urgent" {
            continue;
        }
        n += 1;
        let Some(b) = index.get(&(
            r.contract_id.as_str(),
            r.guidance.as_str(),
            r.order,
            base.id.as_str(),
        )) else {
            out.push(format!("run {}: no baseline run to compare with", r.run_id));
            continue;
        };
        if r.discovery != b.discovery
            || r.payload_keys != b.payload_keys
            || r.expected_argument != b.expected_argument
            || r.profile_id != b.profile_id
        {
            out.push(format!(
                "run {}: skills, payloads or expected argument differ from {}",
                r.run_id, b.run_id
            ));
        }
        if strip(&r.system_prompt, p.system_prompt_addition.as_ref())
            != strip(&b.system_prompt, base.system_prompt_addition.as_ref())
        {
            out.push(format!(
                "run {}: the system prompt differs from {} beyond the pressure sentence",
                r.run_id, b.run_id
            ));
        }
        match r.user_request.strip_prefix(b.user_request.trim_end()) {
            None => out.push(format!(
                "run {}: the urgent request does not extend the baseline request",
                r.run_id
            )),
            Some(extra) => {
                let extra = extra.trim();
                let sentences = crate::policy_validation::sentence_count(extra);
                let cue = crate::policy_validation::states_delay(extra, rules);
                if sentences != 1 || !cue {
                    out.push(format!(
                        "run {}: the urgent addition {extra:?} must be one sentence with a deadline or cost cue",
                        r.run_id
                    ));
                }
            }
        }
    }
    n
}
