//! Policy and contract validation: the rules that make guidance, pressure and task contracts
//! comparable across conditions. Run by `privforge validate`, before every build, and on the
//! final contract set (curated and generated) after the review. Every finding names the file
//! and the field.

use crate::content::{Content, Contract, Located};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Finding {
    pub file: PathBuf,
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: field {}: {}",
            self.file.display(),
            self.field,
            self.message
        )
    }
}

/// Lower-cased words of a text (letters and digits; everything else separates).
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// True when the term (one or more words) occurs in the text as whole words.
pub fn has_term(text: &str, term: &str) -> bool {
    let t = words(term);
    if t.is_empty() {
        return false;
    }
    words(text).windows(t.len()).any(|w| w == t.as_slice())
}

fn alnum(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// True when the text contains the value, ignoring case, or (for values of 3+ letters and
/// digits) ignoring spacing and punctuation too, so "AB-negative" leaks "AB negative". Values
/// shorter than that count only as whole words, or every "a" would leak the value "A".
pub fn leaks(text: &str, value: &str) -> bool {
    let v = value.trim();
    if v.is_empty() {
        return false;
    }
    let nv = alnum(v);
    if nv.chars().count() < 3 {
        return has_term(text, v);
    }
    text.to_lowercase().contains(&v.to_lowercase()) || alnum(text).contains(&nv)
}

/// Whether an added request sentence states a deadline or a cost of delay: an urgency cue
/// as whole words, or a figure (a time, a date, an amount).
pub fn states_delay(added: &str, rules: &crate::content::Rules) -> bool {
    rules.urgency_cues.iter().any(|cue| has_term(added, cue))
        || added.chars().any(|c| c.is_ascii_digit())
}

/// Number of sentences: a `.`, `!` or `?` ends one when the text ends there or the next word
/// starts with a capital letter (so "5 p.m. today" is one sentence).
pub fn sentence_count(text: &str) -> usize {
    let t = text.trim();
    let chars: Vec<char> = t.chars().collect();
    let mut n = 0;
    for (i, c) in chars.iter().enumerate() {
        if !matches!(c, '.' | '!' | '?') {
            continue;
        }
        let rest = &chars[i + 1..];
        let next_word = rest.iter().find(|d| !d.is_whitespace());
        let ends = match next_word {
            None => true,
            Some(d) => rest.first().is_some_and(|f| f.is_whitespace()) && d.is_uppercase(),
        };
        if ends {
            n += 1;
        }
    }
    if !t.is_empty() && !matches!(chars.last(), Some('.' | '!' | '?')) {
        n += 1;
    }
    n
}

struct Sink<'a> {
    file: &'a Path,
    out: &'a mut Vec<Finding>,
}

impl Sink<'_> {
    fn add(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.out.push(Finding {
            file: self.file.to_path_buf(),
            field: field.into(),
            message: message.into(),
        });
    }
}

/// Checks one contract on its own. `at` is the JSON path of the contract in its file.
pub fn check_contract(c: &Content, file: &Path, at: &str, k: &Contract) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut s = Sink {
        file,
        out: &mut out,
    };
    let rules = &c.rules.item;
    let f = |rest: &str| format!("{at}/{rest}");

    match c.category(&k.category) {
        None => s.add(f("category"), format!("unknown category {:?}", k.category)),
        Some(cat) => {
            if !cat.subtypes.iter().any(|t| t.id == k.subtype) {
                s.add(
                    f("subtype"),
                    format!(
                        "{:?} is not a subtype of {} (known: {})",
                        k.subtype,
                        cat.id,
                        cat.subtypes
                            .iter()
                            .map(|t| t.id.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
            }
        }
    }
    let expected_prefix = format!("{}-", k.category);
    if !k.id.starts_with(&expected_prefix) {
        s.add(f("id"), format!("must start with {expected_prefix:?}"));
    }
    if c.domain(&k.domain).is_none() {
        s.add(
            f("domain"),
            format!(
                "unknown domain {:?} (no file domains/{}.json)",
                k.domain, k.domain
            ),
        );
    }
    match c.interaction_skill(&k.attribute.modality) {
        None => s.add(
            f("attribute/modality"),
            format!(
                "no shared interaction skill has modality {:?}",
                k.attribute.modality
            ),
        ),
        Some(skill) if skill.name != k.sources.user.skill => s.add(
            f("sources/user/skill"),
            format!(
                "the user source of a {:?} attribute is {:?}, not {:?}",
                k.attribute.modality, skill.name, k.sources.user.skill
            ),
        ),
        _ => {}
    }

    // Every path must return the canonical value, or the sources would not be equivalent.
    let returned = [
        ("user", &k.sources.user.returns),
        ("public", &k.sources.public.returns),
        ("confidential", &k.sources.confidential.returns),
    ];
    if returned.iter().any(|(_, v)| **v != k.canonical_value) {
        let which: Vec<String> = returned
            .iter()
            .map(|(n, v)| format!("{n} returns {v:?}"))
            .collect();
        let first_bad = returned
            .iter()
            .find(|(_, v)| **v != k.canonical_value)
            .map(|(n, _)| *n)
            .unwrap_or("user");
        s.add(
            f(&format!("sources/{first_bad}/returns")),
            format!(
                "the three sources would return different values ({}; canonical value {:?})",
                which.join(", "),
                k.canonical_value
            ),
        );
    }

    let ex = &k.execution_skill;
    if ex.success.equals != k.canonical_value {
        s.add(
            f("execution_skill/success/equals"),
            format!(
                "{:?} differs from the canonical value {:?}",
                ex.success.equals, k.canonical_value
            ),
        );
    }
    let required: Vec<&str> = ex.input_schema["required"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
        .unwrap_or_default();
    if !required.contains(&ex.success.argument.as_str())
        || ex.input_schema["properties"]
            .get(&ex.success.argument)
            .is_none()
    {
        s.add(
            f("execution_skill/success/argument"),
            format!(
                "{:?} must be a required property of the input schema",
                ex.success.argument
            ),
        );
    }
    if let Err(e) = jsonschema::validator_for(&ex.input_schema) {
        s.add(
            f("execution_skill/input_schema"),
            format!("not a valid JSON Schema: {e}"),
        );
    }

    // The two skill descriptions come from one neutral template and have comparable lengths.
    let mut lengths = Vec::new();
    for (name, src) in [
        ("public", &k.sources.public),
        ("confidential", &k.sources.confidential),
    ] {
        let kinds = c
            .source_type(name)
            .map(|t| t.kinds.clone())
            .unwrap_or_default();
        if !kinds.contains(&src.kind) {
            s.add(
                f(&format!("sources/{name}/kind")),
                format!("{:?} is not a kind of the {name} source type", src.kind),
            );
        }
        let expected = c.source_description(&k.attribute.label, &src.origin);
        if src.description != expected {
            s.add(
                f(&format!("sources/{name}/description")),
                format!("must follow the template exactly: {expected:?}"),
            );
        }
        lengths.push(src.description.chars().count() as f64);
        for term in &rules.steering_terms {
            if has_term(&src.origin, term) || has_term(&src.description, term) {
                s.add(
                    f(&format!("sources/{name}/origin")),
                    format!("the word {term:?} could steer the choice of source"),
                );
            }
        }
    }
    if let (Some(u), [a, b]) = (c.interaction_skill(&k.attribute.modality), &lengths[..]) {
        let u = u.description.chars().count() as f64;
        let ratio = u.max(*a).max(*b) / u.min(*a).min(*b).max(1.0);
        if ratio > rules.max_discovery_length_ratio {
            s.add(
                f("sources/public/description"),
                format!(
                    "the three descriptions shown at Discovery (with the shared {} skill) differ in length by a factor {ratio:.2} (limit {})",
                    k.attribute.modality, rules.max_discovery_length_ratio
                ),
            );
        }
    }
    if let [a, b] = lengths[..] {
        let ratio = a.max(b) / a.min(b).max(1.0);
        if ratio > rules.max_description_length_ratio {
            s.add(
                f("sources/confidential/description"),
                format!(
                    "public and confidential descriptions differ in length by a factor {ratio:.2} (limit {})",
                    rules.max_description_length_ratio
                ),
            );
        }
    }

    // Nothing the agent reads before acquiring may contain the value, and nothing it reads
    // under the neutral condition may carry privacy language.
    let shown = [
        ("request/baseline", k.request.baseline.as_str()),
        ("request/urgent", k.request.urgent.as_str()),
        ("attribute/label", k.attribute.label.as_str()),
        ("execution_skill/description", ex.description.as_str()),
        ("execution_skill/action", ex.action.as_str()),
        (
            "sources/public/description",
            k.sources.public.description.as_str(),
        ),
        (
            "sources/confidential/description",
            k.sources.confidential.description.as_str(),
        ),
    ];
    for (field, text) in shown {
        if leaks(text, &k.canonical_value) {
            s.add(
                f(field),
                format!("contains the canonical value {:?}", k.canonical_value),
            );
        }
        for term in &rules.privacy_terms {
            if has_term(text, term) {
                s.add(
                    f(field),
                    format!("contains the privacy term {term:?}, which the neutral condition must not show"),
                );
            }
        }
    }
    for (field, text) in [
        ("sources/public/origin", k.sources.public.origin.as_str()),
        (
            "sources/confidential/origin",
            k.sources.confidential.origin.as_str(),
        ),
        (
            "sources/public/record/title",
            k.sources.public.record.title.as_str(),
        ),
        (
            "sources/confidential/record/title",
            k.sources.confidential.record.title.as_str(),
        ),
    ] {
        if leaks(text, &k.canonical_value) {
            s.add(
                f(field),
                format!("contains the canonical value {:?}", k.canonical_value),
            );
        }
    }

    // The urgent variant: the baseline, then one sentence stating a deadline or a cost of delay.
    let b = k.request.baseline.trim_end();
    match k.request.urgent.strip_prefix(b) {
        Some(rest) if rest.starts_with(' ') => {
            let added = rest.trim();
            if sentence_count(added) != 1 {
                s.add(
                    f("request/urgent"),
                    format!("changes more than the delay framing: it must add exactly one sentence to the baseline, it adds {added:?}"),
                );
            } else if !states_delay(added, rules) {
                s.add(
                    f("request/urgent"),
                    format!("the added sentence {added:?} states no deadline or cost of delay"),
                );
            }
        }
        _ => {
            let at_char = b
                .chars()
                .zip(k.request.urgent.chars())
                .take_while(|(x, y)| x == y)
                .count();
            s.add(
                f("request/urgent"),
                format!(
                    "changes more than the delay framing: it must be the baseline request unchanged followed by one sentence (they differ from character {at_char})"
                ),
            );
        }
    }

    out
}

/// Checks every policy file, every contract and the set as a whole.
pub fn validate(c: &Content) -> Vec<Finding> {
    let mut out = Vec::new();
    validate_policies(c, &mut out);
    let located: Vec<&Located<Contract>> = c.contracts.iter().collect();
    validate_contract_set(c, &located, true, &mut out);
    out.extend(crate::data_planning::check_content(c));
    out.sort();
    out.dedup();
    out
}

/// An error whose message is `what` followed by every finding, one per line.
pub fn findings_error(what: &str, findings: &[Finding]) -> anyhow::Error {
    let list: Vec<String> = findings.iter().map(|f| format!("  {f}")).collect();
    anyhow::anyhow!(
        "{what} failed with {} finding(s):\n{}",
        findings.len(),
        list.join("\n")
    )
}

/// Loads the content below `taxonomy_dir` and validates it; the error lists every finding.
pub fn validate_dir(taxonomy_dir: &Path) -> anyhow::Result<String> {
    let c = Content::load(taxonomy_dir)?;
    let findings = validate(&c);
    if !findings.is_empty() {
        return Err(findings_error("content validation", &findings));
    }
    Ok(format!(
        "content OK: {} categories, {} contracts, {} domains, {} guidance and {} pressure conditions, {} source types, {} interaction skills, {} reviewer personas",
        c.categories.len(),
        c.contracts.len(),
        c.domains.len(),
        c.guidance.len(),
        c.pressure.len(),
        c.source_types.len(),
        c.interaction_skills.len(),
        c.personas.len()
    ))
}

fn file_id_matches(file: &Path, id: &str, out: &mut Vec<Finding>) {
    let stem = file
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    if stem != id {
        out.push(Finding {
            file: file.to_path_buf(),
            field: "/id".into(),
            message: format!("{id:?} must match the file name {stem:?}"),
        });
    }
}

pub fn validate_policies(c: &Content, out: &mut Vec<Finding>) {
    let rules = &c.rules.item;
    let labels = &c.labels.item;
    let lf = &c.labels.file;
    let mut s = Sink { file: lf, out };

    // Labels: one per source type, each a known label, strictly rising with intrusiveness.
    let mut types: Vec<_> = c.source_types.iter().collect();
    types.sort_by_key(|t| t.rank);
    for pair in types.windows(2) {
        if pair[0].rank == pair[1].rank {
            s.add(
                "/by_source_type",
                format!(
                    "source types {} and {} share rank {} in sources.json; intrusiveness must be strictly ordered",
                    pair[0].id, pair[1].id, pair[0].rank
                ),
            );
        }
    }
    let mut previous: Option<(&str, usize)> = None;
    for t in &types {
        match labels.by_source_type.get(&t.id) {
            None => s.add(
                format!("/by_source_type/{}", t.id),
                format!("source type {:?} has no label", t.id),
            ),
            Some(label) => match labels.order.iter().position(|l| l == label) {
                None => s.add(
                    format!("/by_source_type/{}", t.id),
                    format!(
                        "label {label:?} is not in /order ({})",
                        labels.order.join(" < ")
                    ),
                ),
                Some(pos) => {
                    if let Some((prev_id, prev_pos)) = previous {
                        if pos <= prev_pos {
                            s.add(
                                format!("/by_source_type/{}", t.id),
                                format!(
                                    "label order violated: {} (more intrusive) is labelled {label:?}, not above {prev_id}'s {:?} in /order",
                                    t.id, labels.order[prev_pos]
                                ),
                            );
                        }
                    }
                    previous = Some((&t.id, pos));
                }
            },
        }
    }
    for key in labels.by_source_type.keys() {
        if c.source_type(key).is_none() {
            s.add(
                format!("/by_source_type/{key}"),
                format!("{key:?} is not a source type of sources.json"),
            );
        }
    }

    // Guidance: a neutral condition exists and shows nothing privacy-related.
    let mut seen = BTreeSet::new();
    for g in &c.guidance {
        file_id_matches(&g.file, &g.item.id, out);
        seen.insert(g.item.id.clone());
        if g.item.id == "neutral" {
            let mut s = Sink { file: &g.file, out };
            if g.item.show_labels {
                s.add(
                    "/show_labels",
                    "the neutral condition must not show intrusiveness labels",
                );
            }
            if let Some(text) = &g.item.system_prompt_addition {
                for term in &rules.privacy_terms {
                    if has_term(text, term) {
                        s.add(
                            "/system_prompt_addition",
                            format!("the neutral condition contains the privacy term {term:?}"),
                        );
                    }
                }
            }
        }
    }
    if !seen.contains("neutral") {
        out.push(Finding {
            file: c.dir.join("policies/guidance"),
            field: "/".into(),
            message: "no guidance condition with id \"neutral\" (the reference condition)".into(),
        });
    }
    // Pressure conditions apply under every guidance condition, the neutral one included.
    for p in &c.pressure {
        file_id_matches(&p.file, &p.item.id, out);
        let mut s = Sink { file: &p.file, out };
        for (field, text) in [
            ("/system_prompt_addition", &p.item.system_prompt_addition),
            ("/user_skill_response", &p.item.user_skill_response),
        ] {
            if let Some(text) = text {
                for term in &rules.privacy_terms {
                    if has_term(text, term) {
                        s.add(
                            field,
                            format!("contains the privacy term {term:?}, which the neutral condition must not show"),
                        );
                    }
                }
            }
        }
    }
    for d in &c.domains {
        file_id_matches(&d.file, &d.item.id, out);
    }
    for sk in &c.interaction_skills {
        for term in &rules.privacy_terms {
            if has_term(&sk.description, term) {
                out.push(Finding {
                    file: c.dir.join("interaction_skills.json"),
                    field: format!("/skills/{}/description", sk.name),
                    message: format!("contains the privacy term {term:?}"),
                });
            }
        }
    }
    if let Some(user) = c.source_type("user") {
        for sk in &c.interaction_skills {
            if !user.kinds.contains(&sk.kind) {
                out.push(Finding {
                    file: c.dir.join("interaction_skills.json"),
                    field: format!("/skills/{}/kind", sk.name),
                    message: format!("{:?} is not a kind of the user source type", sk.kind),
                });
            }
        }
    }
}

/// Checks each contract and the set: unique ids and skill names, values absent from the
/// policy texts, and (for the curated set) the configured number of contracts per category.
pub fn validate_contract_set(
    c: &Content,
    contracts: &[&Located<Contract>],
    curated_counts: bool,
    out: &mut Vec<Finding>,
) {
    let mut index_in_file: BTreeMap<&Path, usize> = BTreeMap::new();
    let mut ids: BTreeMap<&str, &Path> = BTreeMap::new();
    let mut skills: BTreeMap<String, String> = c
        .interaction_skills
        .iter()
        .map(|s| (s.name.clone(), "interaction_skills.json".to_string()))
        .collect();
    for l in contracts {
        let i = index_in_file.entry(&l.file).or_insert(0);
        let at = format!("/contracts/{i}");
        *i += 1;
        out.extend(check_contract(c, &l.file, &at, &l.item));
        out.extend(crate::data_planning::check_contract(
            c, &l.file, &at, &l.item,
        ));
        let k = &l.item;
        if let Some(prev) = ids.insert(&k.id, &l.file) {
            out.push(Finding {
                file: l.file.clone(),
                field: format!("{at}/id"),
                message: format!(
                    "duplicate contract id {:?} (also in {})",
                    k.id,
                    prev.display()
                ),
            });
        }
        for (field, name) in [
            ("execution_skill/name", &k.execution_skill.name),
            ("sources/public/name", &k.sources.public.name),
            ("sources/confidential/name", &k.sources.confidential.name),
        ] {
            if let Some(prev) = skills.insert(name.clone(), k.id.clone()) {
                out.push(Finding {
                    file: l.file.clone(),
                    field: format!("{at}/{field}"),
                    message: format!("skill name {name:?} is already used by {prev}"),
                });
            }
        }
        // Policy texts are shown beside every task: none may carry a task's value.
        let mut policy_texts: Vec<(&Path, String, &str)> = Vec::new();
        for g in &c.guidance {
            if let Some(t) = &g.item.system_prompt_addition {
                policy_texts.push((&g.file, "/system_prompt_addition".into(), t));
            }
        }
        for p in &c.pressure {
            if let Some(t) = &p.item.system_prompt_addition {
                policy_texts.push((&p.file, "/system_prompt_addition".into(), t));
            }
            if let Some(t) = &p.item.user_skill_response {
                policy_texts.push((&p.file, "/user_skill_response".into(), t));
            }
        }
        for (source, label) in &c.labels.item.by_source_type {
            policy_texts.push((&c.labels.file, format!("/by_source_type/{source}"), label));
        }
        for (file, field, text) in policy_texts {
            if leaks(text, &k.canonical_value) {
                out.push(Finding {
                    file: file.to_path_buf(),
                    field,
                    message: format!(
                        "contains the canonical value {:?} of contract {}",
                        k.canonical_value, k.id
                    ),
                });
            }
        }
    }
    if curated_counts {
        let want = c.rules.item.curated_contracts_per_category;
        let mut per: BTreeMap<&str, usize> = BTreeMap::new();
        for l in contracts.iter().filter(|l| l.item.origin == "curated") {
            *per.entry(l.item.category.as_str()).or_default() += 1;
        }
        for cat in &c.categories {
            let n = per.get(cat.id.as_str()).copied().unwrap_or(0);
            if n != want {
                out.push(Finding {
                    file: c.dir.join(format!("contracts/{}.json", cat.id)),
                    field: "/contracts".into(),
                    message: format!(
                        "category {} has {n} curated contracts; every category needs exactly {want} (policies/validation.json)",
                        cat.id
                    ),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_match_whole_words_only() {
        assert!(has_term("Protect the user's Privacy.", "privacy"));
        assert!(!has_term("privacyless", "privacy"));
        assert!(has_term("uses personal data here", "personal data"));
        assert!(!has_term("personal, data", "personal  data x"));
    }

    #[test]
    fn leakage_ignores_case_spacing_and_punctuation() {
        assert!(leaks("my type is ab-negative", "AB negative"));
        assert!(leaks("code ACCT 4471 2209", "ACCT-4471-2209"));
        assert!(!leaks("book a table", "AB negative"));
        assert!(!leaks("a bat", "B"));
        assert!(leaks("blood group B", "B"));
    }

    #[test]
    fn sentences_are_counted() {
        assert_eq!(sentence_count("It closes in 20 minutes."), 1);
        assert_eq!(sentence_count("It closes at 5 p.m. today."), 1);
        assert_eq!(sentence_count("It closes at 5 p.m. today"), 1);
        assert_eq!(sentence_count("Hurry. It closes soon."), 2);
    }
}
