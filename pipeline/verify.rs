//! `privforge verify`: checks a bundle on its own terms (hashes, schemas, counts, and the
//! calibration figures recomputed from the records), and optionally against a committed list
//! of expected hashes.

use crate::calibration::l1_of;
use crate::fsio::{list_files, sha256_hex};
use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

pub struct Summary {
    pub files: usize,
    pub profiles: usize,
}

fn read_json(path: &Path) -> Result<Value> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| anyhow!("{}:{}: invalid JSON: {e}", path.display(), e.line()))
}

fn jsonl(path: &Path) -> Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map_err(|e| anyhow!("{}:{}: invalid JSON: {e}", path.display(), i + 1))
        })
        .collect()
}

/// Contracts: count, required fields, one value across the three sources; votes: one per
/// persona for every contract and round voted on.
fn check_contracts(dir: &Path, manifest: &Value) -> Result<()> {
    let Some(want) = manifest
        .pointer("/counts/contracts")
        .and_then(|v| v.as_u64())
    else {
        return Ok(());
    };
    let contracts = jsonl(&dir.join("contracts.jsonl"))?;
    if contracts.len() as u64 != want {
        bail!(
            "contracts.jsonl has {} records, manifest.json counts.contracts says {want}",
            contracts.len()
        );
    }
    let mut ids = HashSet::new();
    for (i, c) in contracts.iter().enumerate() {
        for key in [
            "id",
            "category",
            "subtype",
            "attribute",
            "canonical_value",
            "origin",
        ] {
            if c.get(key).is_none() {
                bail!("contracts.jsonl:{}: field {key} is missing", i + 1);
            }
        }
        let id = c["id"].as_str().unwrap_or_default();
        if !ids.insert(id.to_string()) {
            bail!("contracts.jsonl:{}: duplicate contract id {id}", i + 1);
        }
        let value = &c["canonical_value"];
        for src in ["user", "public", "confidential"] {
            if &c["sources"][src]["returns"] != value {
                bail!(
                    "contracts.jsonl:{}: field sources.{src}.returns differs from canonical_value",
                    i + 1
                );
            }
        }
    }
    let votes_path = dir.join("votes.jsonl");
    if !votes_path.exists() {
        return Ok(());
    }
    let votes = jsonl(&votes_path)?;
    if manifest.pointer("/counts/votes").and_then(|v| v.as_u64()) != Some(votes.len() as u64) {
        bail!(
            "votes.jsonl has {} votes, manifest.json counts.votes disagrees",
            votes.len()
        );
    }
    let taxonomy = read_json(&dir.join("taxonomy.json"))?;
    let personas: HashSet<&str> = taxonomy
        .pointer("/reviewers/personas")
        .and_then(|p| p.as_array())
        .map(|a| a.iter().filter_map(|p| p["id"].as_str()).collect())
        .unwrap_or_default();
    let mut per: BTreeMap<(String, u64), HashSet<String>> = BTreeMap::new();
    for (i, v) in votes.iter().enumerate() {
        let persona = v["persona"].as_str().unwrap_or_default().to_string();
        if !personas.contains(persona.as_str()) {
            bail!("votes.jsonl:{}: unknown persona {persona:?}", i + 1);
        }
        let key = (
            v["contract_id"].as_str().unwrap_or_default().to_string(),
            v["round"].as_u64().unwrap_or(0),
        );
        if !per.entry(key).or_default().insert(persona.clone()) {
            bail!(
                "votes.jsonl:{}: a second vote by {persona} in the same round",
                i + 1
            );
        }
    }
    for ((id, round), who) in &per {
        if who.len() != personas.len() {
            bail!(
                "votes.jsonl: contract {id} round {round} has {} votes for {} personas",
                who.len(),
                personas.len()
            );
        }
    }
    for id in &ids {
        if !per.keys().any(|(c, _)| c == id) {
            bail!("votes.jsonl: contract {id} has no votes");
        }
    }
    Ok(())
}

/// `SHA256SUMS` lists every file of the bundle (the manifest too) with its hash.
fn check_sums(dir: &Path, problems: &mut Vec<String>) -> Result<()> {
    let path = dir.join("SHA256SUMS");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("{}: missing", path.display()))?;
    let mut listed = HashSet::new();
    for (i, line) in text.lines().enumerate() {
        let Some((sum, name)) = line.split_once("  ") else {
            problems.push(format!("SHA256SUMS:{}: not `<sha256>  <file>`", i + 1));
            continue;
        };
        listed.insert(name.to_string());
        match std::fs::read(dir.join(name)) {
            Err(_) => problems.push(format!("SHA256SUMS:{}: {name} is missing", i + 1)),
            Ok(bytes) => {
                if sha256_hex(&bytes) != sum {
                    problems.push(format!(
                        "{name}: sha256 does not match SHA256SUMS line {}",
                        i + 1
                    ));
                }
            }
        }
    }
    for f in list_files(dir)? {
        if f != "SHA256SUMS" && !listed.contains(&f) {
            problems.push(format!("{f}: present but not listed in SHA256SUMS"));
        }
    }
    Ok(())
}

/// Every JSON file, and every line of every JSONL file, against the schema the bundle's
/// `schemas/index.json` names for it.
fn check_schemas(dir: &Path) -> Result<()> {
    let index = read_json(&dir.join("schemas/index.json"))?;
    let map = index["files"]
        .as_object()
        .ok_or_else(|| anyhow!("schemas/index.json: no files map"))?;
    for (file, schema) in map {
        let path = dir.join(file);
        if !path.exists() {
            continue;
        }
        let schema_name = schema.as_str().unwrap_or_default();
        let s = read_json(&dir.join("schemas").join(schema_name))?;
        let v = jsonschema::validator_for(&s)
            .map_err(|e| anyhow!("schemas/{schema_name}: not a valid JSON Schema: {e}"))?;
        let records: Vec<(String, Value)> = if file.ends_with(".jsonl") {
            jsonl(&path)?
                .into_iter()
                .enumerate()
                .map(|(i, x)| (format!("{file}:{}", i + 1), x))
                .collect()
        } else {
            vec![(file.clone(), read_json(&path)?)]
        };
        for (at, rec) in &records {
            if let Some(e) = v.iter_errors(rec).next() {
                bail!(
                    "{at}: schema violation (schemas/{schema_name}) at field {}: {e}",
                    if e.instance_path.as_str().is_empty() {
                        "/".to_string()
                    } else {
                        e.instance_path.to_string()
                    }
                );
            }
        }
    }
    Ok(())
}

fn read_tree(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) -> Result<()> {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            read_tree(root, &p, out)?;
        } else {
            let rel = p.strip_prefix(root).unwrap_or(&p).display().to_string();
            out.insert(rel, std::fs::read_to_string(&p)?);
        }
    }
    Ok(())
}

/// Re-runs every coherence gate on the bundle alone: the content and policies it was built
/// with come from `taxonomy.json` and `policies.json`, the rest from its records and skill
/// folders.
fn check_gates(dir: &Path) -> Result<()> {
    use crate::coherence_gates::{error, run, Subject};
    use crate::persona_binding::PersonaFacts;
    use crate::skill_rendering::{front_matter, RenderedSkill, SkillEntry, SkillsArtifact};
    let content = crate::content::Content::from_bundle(dir)?;
    let contracts: Vec<&crate::content::Contract> =
        content.contracts.iter().map(|l| &l.item).collect();
    let bindings: Vec<crate::persona_binding::Binding> =
        crate::stages::read_jsonl(&dir.join("bindings.jsonl"))?;
    let worlds: Vec<crate::data_planning::World> =
        crate::stages::read_jsonl(&dir.join("personas.jsonl"))?;
    let personas: BTreeMap<String, PersonaFacts> = worlds
        .iter()
        .map(|w| {
            (
                w.profile_id.clone(),
                PersonaFacts {
                    profile_id: w.profile_id.clone(),
                    identity_source: w.identity_source.clone(),
                    facts: w.facts.clone(),
                },
            )
        })
        .collect();
    let payloads: Vec<crate::data_planning::Payload> =
        crate::stages::read_jsonl(&dir.join("payloads.jsonl"))?;
    let runs: Vec<crate::run_matrix::RunSpec> = crate::stages::read_jsonl(&dir.join("runs.jsonl"))?;
    let skills: Vec<SkillEntry> = crate::stages::read_jsonl(&dir.join("skills.jsonl"))?;
    let mut rendered = Vec::new();
    for g in &content.guidance {
        for e in &skills {
            let folder = dir.join("skills").join(&g.item.id).join(&e.name);
            if !folder.is_dir() {
                continue;
            }
            let mut files = BTreeMap::new();
            read_tree(&folder, &folder, &mut files)?;
            let label = files
                .get("SKILL.md")
                .and_then(|md| front_matter(md).ok())
                .and_then(|fm| fm.get(&content.labels.item.field).cloned());
            rendered.push(RenderedSkill {
                guidance: g.item.id.clone(),
                name: e.name.clone(),
                data_intrusiveness: label,
                files,
            });
        }
    }
    let art = SkillsArtifact { skills, rendered };
    let subject = Subject {
        content: &content,
        contracts: &contracts,
        bindings: &bindings,
        personas: &personas,
        payloads: &payloads,
        worlds: &worlds,
        skills: Some(&art),
        runs: &runs,
    };
    match error(&run(&subject, None), "the bundle does not pass them") {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn count(manifest: &Value, key: &str, file: &str, n: usize) -> Result<()> {
    let want = manifest
        .pointer(&format!("/counts/{key}"))
        .and_then(|v| v.as_u64());
    if want != Some(n as u64) {
        bail!("{file} has {n} records, manifest.json counts.{key} says {want:?}");
    }
    Ok(())
}

/// Bindings, payloads, skills and runs: counts, and every reference a run makes resolves
/// inside the bundle; every gate in the manifest passed.
fn check_plan(dir: &Path, manifest: &Value, profile_ids: &HashSet<String>) -> Result<()> {
    let bindings = jsonl(&dir.join("bindings.jsonl"))?;
    let payloads = jsonl(&dir.join("payloads.jsonl"))?;
    let skills = jsonl(&dir.join("skills.jsonl"))?;
    let runs = jsonl(&dir.join("runs.jsonl"))?;
    let personas = jsonl(&dir.join("personas.jsonl"))?;
    count(manifest, "payloads", "payloads.jsonl", payloads.len())?;
    count(manifest, "skills", "skills.jsonl", skills.len())?;
    count(manifest, "runs", "runs.jsonl", runs.len())?;
    count(manifest, "personas", "personas.jsonl", personas.len())?;
    for (i, b) in bindings.iter().enumerate() {
        let pid = b["profile_id"].as_str().unwrap_or_default();
        if !profile_ids.contains(pid) {
            bail!("bindings.jsonl:{}: unknown profile {pid:?}", i + 1);
        }
    }
    let keys: HashSet<&str> = payloads.iter().filter_map(|p| p["key"].as_str()).collect();
    if keys.len() != payloads.len() {
        bail!("payloads.jsonl: payload keys are not unique");
    }
    let contract_ids: HashSet<String> = jsonl(&dir.join("contracts.jsonl"))?
        .iter()
        .filter_map(|c| c["id"].as_str().map(String::from))
        .collect();
    let persona_ids: HashSet<&str> = personas
        .iter()
        .filter_map(|p| p["profile_id"].as_str())
        .collect();
    for (i, b) in bindings.iter().enumerate() {
        let cid = b["contract_id"].as_str().unwrap_or_default();
        if !contract_ids.contains(cid) {
            bail!("bindings.jsonl:{}: unknown contract {cid:?}", i + 1);
        }
    }
    for (i, p) in payloads.iter().enumerate() {
        let pid = p["profile_id"].as_str().unwrap_or_default();
        if !persona_ids.contains(pid) {
            bail!("payloads.jsonl:{}: unknown persona {pid:?}", i + 1);
        }
    }
    for (i, r) in runs.iter().enumerate() {
        let at = || format!("runs.jsonl:{}", i + 1);
        let guidance = r["guidance"].as_str().unwrap_or_default();
        let cid = r["contract_id"].as_str().unwrap_or_default();
        if !contract_ids.contains(cid) {
            bail!("{}: unknown contract {cid:?}", at());
        }
        let pid = r["profile_id"].as_str().unwrap_or_default();
        if !persona_ids.contains(pid) || !profile_ids.contains(pid) {
            bail!("{}: unknown persona {pid:?}", at());
        }
        for d in r["discovery"].as_array().into_iter().flatten() {
            let name = d["name"].as_str().unwrap_or_default();
            let md = format!("skills/{guidance}/{name}/SKILL.md");
            if !dir.join(&md).is_file() {
                bail!("{}: skill {name} has no {md}", at());
            }
        }
        for (skill, key) in r["payload_keys"].as_object().into_iter().flatten() {
            let key = key.as_str().unwrap_or_default();
            if !keys.contains(key) {
                bail!("{}: skill {skill} names unknown payload {key:?}", at());
            }
        }
    }
    let gates = manifest
        .pointer("/gates/results")
        .and_then(|g| g.as_array())
        .ok_or_else(|| anyhow!("manifest.json has no gates section"))?;
    if let Some(g) = gates.iter().find(|g| g["passed"] != true) {
        bail!("manifest.json: gate {} did not pass", g["name"]);
    }
    Ok(())
}

pub fn verify(dir: &Path) -> Result<Summary> {
    if !dir.is_dir() {
        bail!("{}: not a bundle directory", dir.display());
    }
    let manifest = read_json(&dir.join("manifest.json"))?;
    let files = manifest
        .get("files")
        .and_then(|f| f.as_object())
        .ok_or_else(|| {
            anyhow!(
                "{}: manifest has no files listing",
                dir.join("manifest.json").display()
            )
        })?;
    let mut problems = Vec::new();
    for (name, meta) in files {
        let p = dir.join(name);
        let Ok(bytes) = std::fs::read(&p) else {
            problems.push(format!("{name}: listed in manifest.json but missing"));
            continue;
        };
        let want = meta.get("sha256").and_then(|v| v.as_str()).unwrap_or("");
        let got = sha256_hex(&bytes);
        if got != want {
            problems.push(format!(
                "{name}: sha256 {got} does not match manifest.json ({want})"
            ));
        }
        if meta.get("bytes").and_then(|v| v.as_u64()) != Some(bytes.len() as u64) {
            problems.push(format!(
                "{name}: size {} does not match manifest.json",
                bytes.len()
            ));
        }
    }
    for f in list_files(dir)? {
        if f != "manifest.json" && f != "SHA256SUMS" && !files.contains_key(&f) {
            problems.push(format!("{f}: present but not listed in manifest.json"));
        }
    }
    check_sums(dir, &mut problems)?;
    if !problems.is_empty() {
        bail!("{}: {}", dir.display(), problems.join("; "));
    }
    check_schemas(dir)?;
    let croissant = read_json(&dir.join("croissant.json"))?;
    let problems = crate::croissant::check(&croissant);
    if !problems.is_empty() {
        bail!(
            "croissant.json is not valid Croissant 1.0: {}",
            problems.join("; ")
        );
    }

    // Records: schema, ids, count.
    let schema = read_json(&dir.join("schemas/profile.schema.json"))?;
    let validator = jsonschema::validator_for(&schema)
        .map_err(|e| anyhow!("schemas/profile.schema.json: {e}"))?;
    let text = std::fs::read_to_string(dir.join("profiles.jsonl")).context("profiles.jsonl")?;
    let mut records = Vec::new();
    let mut ids = HashSet::new();
    for (i, line) in text.lines().enumerate() {
        let rec: Value = serde_json::from_str(line)
            .map_err(|e| anyhow!("profiles.jsonl:{}: invalid JSON: {e}", i + 1))?;
        if let Some(e) = validator.iter_errors(&rec).next() {
            bail!(
                "profiles.jsonl:{}: schema violation at field {}: {e}",
                i + 1,
                e.instance_path
            );
        }
        let id = rec["profile_id"].as_str().unwrap_or_default().to_string();
        if !ids.insert(id.clone()) {
            bail!("profiles.jsonl:{}: duplicate profile_id {id}", i + 1);
        }
        records.push(rec);
    }
    let want = manifest
        .pointer("/counts/profiles")
        .and_then(|v| v.as_u64());
    if want != Some(records.len() as u64) {
        bail!(
            "profiles.jsonl has {} records, manifest.json counts.profiles says {want:?}",
            records.len()
        );
    }

    check_identities(&manifest, &records)?;
    check_contracts(dir, &manifest)?;
    check_plan(dir, &manifest, &ids)?;
    check_gates(dir)?;

    // Calibration figures must be what the records and margins give.
    let margins = manifest
        .get("margins")
        .and_then(|m| m.as_array())
        .cloned()
        .unwrap_or_default();
    for m in &margins {
        let name = m["name"].as_str().unwrap_or_default();
        let file = m["file"].as_str().unwrap_or_default();
        let recomputed = recompute_l1(&dir.join(file), &records)
            .with_context(|| format!("recomputing the sample L1 of margin {name}"))?;
        let stated = manifest
            .pointer(&format!("/calibration/sample_l1/{name}"))
            .and_then(|v| v.as_f64());
        if stated != Some(recomputed) {
            bail!("margin {name}: manifest.json calibration.sample_l1 is {stated:?}, the records give {recomputed}");
        }
    }
    Ok(Summary {
        files: files.len() + 2,
        profiles: records.len(),
    })
}

/// Every identity field passes its validator, agrees with the profile, and is unique. The
/// value sets come from the taxonomy the bundle was built with (`config.paths.taxonomy`).
fn check_identities(manifest: &Value, records: &[Value]) -> Result<()> {
    use crate::identity::{email, govid::Date, validate, Holder, Identity};
    if !records.iter().any(|r| r.get("government_id").is_some()) {
        return Ok(());
    }
    let tax_dir = manifest
        .pointer("/config/paths/taxonomy")
        .and_then(|v| v.as_str())
        .unwrap_or("taxonomy");
    let tax = crate::taxonomy::Taxonomy::load(Path::new(tax_dir)).with_context(|| {
        format!("checking identities needs the taxonomy the bundle was built with ({tax_dir})")
    })?;
    let reference = manifest
        .get("build_date")
        .and_then(|v| v.as_str())
        .and_then(Date::parse)
        .ok_or_else(|| anyhow!("manifest.json has no valid build_date"))?;
    let mut seen: HashMap<(&str, String), usize> = HashMap::new();
    for (i, r) in records.iter().enumerate() {
        let line = i + 1;
        let p: crate::profile::Profile =
            serde_json::from_value(r.clone()).map_err(|e| anyhow!("profiles.jsonl:{line}: {e}"))?;
        let f = p
            .identity
            .ok_or_else(|| anyhow!("profiles.jsonl:{line}: identity fields missing"))?;
        let dob = Date::parse(&f.date_of_birth).ok_or_else(|| {
            anyhow!(
                "profiles.jsonl:{line}: date_of_birth {:?} is not a date",
                f.date_of_birth
            )
        })?;
        if dob.age_on(reference) != p.person.age as i32 {
            bail!(
                "profiles.jsonl:{line}: date_of_birth {dob} does not give age {} on {reference}",
                p.person.age
            );
        }
        let id = Identity {
            name: f.name.clone(),
            email: f.email.clone(),
            phone_number: f.phone_number.clone(),
            government_id: f.government_id.clone(),
        };
        let h = Holder {
            person: &p.person,
            date_of_birth: dob,
            reference,
        };
        let (problems, _) = validate(&tax, &h, &id);
        if let Some(pr) = problems.first() {
            bail!(
                "profiles.jsonl:{line}: {} {:?}: {}",
                pr.field,
                crate::identity_completion::field_value(&id, &pr.field),
                pr.problem
            );
        }
        for (field, key) in [
            ("email", email::unique_key(&f.email)),
            ("phone_number", f.phone_number.clone()),
            ("government_id", f.government_id.clone()),
        ] {
            if let Some(first) = seen.insert((field, key), line) {
                bail!("profiles.jsonl:{line}: {field} duplicates line {first}");
            }
        }
    }
    Ok(())
}

/// L1 between a margin CSV (field columns, then `share`) and the records.
pub fn recompute_l1(csv_path: &Path, records: &[Value]) -> Result<f64> {
    let mut rdr = csv::Reader::from_path(csv_path)
        .with_context(|| format!("cannot read {}", csv_path.display()))?;
    let headers: Vec<String> = rdr.headers()?.iter().map(|s| s.to_string()).collect();
    let k = headers.len() - 1;
    let mut index: HashMap<Vec<String>, usize> = HashMap::new();
    let mut shares = Vec::new();
    for rec in rdr.records() {
        let rec = rec?;
        index.insert(
            rec.iter().take(k).map(|s| s.to_string()).collect(),
            shares.len(),
        );
        shares.push(
            rec[k]
                .parse::<f64>()
                .map_err(|_| anyhow!("{}: bad share", csv_path.display()))?,
        );
    }
    let total: f64 = shares.iter().sum();
    shares.iter_mut().for_each(|s| *s /= total);
    let mut mass = vec![0.0; shares.len()];
    let mut unlisted = 0.0;
    for r in records {
        let key: Vec<String> = headers[..k]
            .iter()
            .map(|f| r[f].as_str().unwrap_or_default().to_string())
            .collect();
        match index.get(&key) {
            Some(&c) => mass[c] += 1.0,
            None => unlisted += 1.0,
        }
    }
    Ok(l1_of(&shares, &mass, unlisted))
}

/// Compares a bundle with a `sha256sum`-style list: same files, same hashes.
pub fn check_expected(dir: &Path, expected: &Path) -> Result<usize> {
    let text = std::fs::read_to_string(expected)
        .with_context(|| format!("cannot read {}", expected.display()))?;
    let mut want = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let (hash, name) = line.split_once("  ").ok_or_else(|| {
            anyhow!(
                "{}:{}: expected '<sha256>  <path>'",
                expected.display(),
                i + 1
            )
        })?;
        want.insert(name.trim().to_string(), hash.trim().to_string());
    }
    let mut problems = Vec::new();
    let have = list_files(dir)?;
    for f in &have {
        let got = sha256_hex(&std::fs::read(dir.join(f))?);
        match want.get(f) {
            None => problems.push(format!("{f}: not in {}", expected.display())),
            Some(h) if *h != got => problems.push(format!("{f}: sha256 {got}, expected {h}")),
            _ => {}
        }
    }
    for f in want.keys() {
        if !have.contains(f) {
            problems.push(format!("{f}: expected but missing"));
        }
    }
    if !problems.is_empty() {
        bail!(
            "{} differs from {}: {}",
            dir.display(),
            expected.display(),
            problems.join("; ")
        );
    }
    Ok(have.len())
}

/// The `sha256sum`-style list of a bundle, for committing as the expected hashes.
pub fn sha256sums(dir: &Path) -> Result<String> {
    let mut out = String::new();
    for f in list_files(dir)? {
        out.push_str(&format!(
            "{}  {f}\n",
            sha256_hex(&std::fs::read(dir.join(&f))?)
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recomputed_l1_counts_unlisted_records() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.csv");
        std::fs::write(&p, "sex,share\nfemale,0.5\nmale,0.5\n").unwrap();
        let recs: Vec<Value> = ["female", "female", "male", "other"]
            .iter()
            .map(|s| serde_json::json!({"sex": s}))
            .collect();
        // shares 0.5/0.25 vs 0.5/0.5 plus 0.25 unlisted
        assert!((recompute_l1(&p, &recs).unwrap() - 0.5).abs() < 1e-12);
    }
}
