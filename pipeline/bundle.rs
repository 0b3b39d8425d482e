//! Stage 4: assembles the bundle in a staging directory and renames it into place, so a
//! failed build never leaves a half-written bundle behind.

use crate::calibration::{self, IpfReport};
use crate::candidates::CandidateReport;
use crate::fsio::{sha256_hex, to_json_pretty, StagingDir};
use crate::margins::Status;
use crate::profile::{Person, Profile};
use crate::sampling::SamplingReport;
use crate::stages::{
    read_json, read_pool, resolve_ids, AuditArtifact, CalibrationArtifact, IdentityArtifact,
    Inputs, SampleArtifact,
};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// The layout's major version; see the README's "Bundle format" for what bumps which number.
pub const FORMAT: &str = "privforge-bundle/1";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellRow {
    pub cell: Vec<String>,
    pub target: f64,
    pub pool: f64,
    pub sample: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MarginResult {
    pub name: String,
    pub file: String,
    pub fields: Vec<String>,
    pub status: Status,
    pub pool_l1: f64,
    pub sample_l1: f64,
    pub plain_draw_l1: f64,
    pub floor_l1: f64,
    pub cells: Vec<CellRow>,
}

/// `calibration.json` of the bundle.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CalibrationReport {
    pub candidates: CandidateReport,
    /// Total L1 of the bundle's sample (after the seed audit's replacements).
    pub final_total_l1: f64,
    pub pool_size: usize,
    pub backfill_rounds: usize,
    pub deficits_per_round: Vec<usize>,
    pub ipf: IpfReport,
    pub sampling: SamplingReport,
    pub margins: Vec<MarginResult>,
}

/// JSON Schema of a profile record, with the value sets of the build's taxonomy.
pub fn profile_schema(inp: &Inputs) -> Value {
    let tax = &inp.taxonomy;
    let countries: Vec<String> = tax
        .countries
        .iter()
        .map(|c| regex_escape(&c.name))
        .collect();
    let location = format!("^[^,]+, ({})$", countries.join("|"));
    let mut props = serde_json::Map::new();
    props.insert(
        "profile_id".into(),
        json!({"type": "string", "pattern": "^P[0-9]{4,}$"}),
    );
    props.insert(
        "candidate_id".into(),
        json!({"type": "string", "pattern": "^C[0-9]{7,}$"}),
    );
    props.insert(
        "proposal".into(),
        json!({"enum": ["target", "uniform", "backfill"]}),
    );
    props.insert(
        "age".into(),
        json!({"type": "integer", "minimum": tax.fields.age.min, "maximum": tax.fields.age.max}),
    );
    for f in [
        "sex",
        "ethnicity",
        "citizenship",
        "education_level",
        "income_level",
        "relationship_status",
        "religious_belief",
        "occupation",
        "physical_condition",
        "mental_condition",
        "age_group",
        "current_country",
        "birth_country",
        "current_city_size",
        "occupation_group",
    ] {
        props.insert(f.into(), json!({"enum": tax.domain(f).unwrap_or(&[])}));
    }
    for f in ["current_location", "birth_location"] {
        props.insert(f.into(), json!({"type": "string", "pattern": location}));
    }
    let required: Vec<String> = props.keys().cloned().collect();
    props.insert(
        "date_of_birth".into(),
        json!({"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}),
    );
    for f in [
        "name",
        "email",
        "phone_number",
        "government_id",
        "government_id_document",
    ] {
        props.insert(f.into(), json!({"type": "string", "minLength": 1}));
    }
    props.insert(
        "identity_provenance".into(),
        json!({"type": "object", "additionalProperties": {"enum": ["llm", "llm_repaired", "fallback"]}}),
    );
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "PrivForge profile record",
        "type": "object",
        "additionalProperties": false,
        "required": required,
        "properties": props
    })
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if "\\.+*?()|[]{}^$".contains(c) {
                vec!['\\', c]
            } else {
                vec![c]
            }
        })
        .collect()
}

/// What the identifier validators check per country, and which rules of the reference were
/// left unenforced because the reference marks them uncertain.
fn identity_schemes(inp: &Inputs) -> Value {
    let schemes: Vec<Value> = crate::identity::govid::all()
        .into_iter()
        .map(|s| {
            let country = inp
                .taxonomy
                .countries
                .iter()
                .find(|c| c.iso3 == s.iso3())
                .map(|c| c.name.clone());
            json!({
                "iso3": s.iso3(),
                "country": country,
                "document": s.document(),
                "compact_layout": crate::identity::govid::syntax_pattern(s.iso3()),
                "uncertain_rules_not_enforced": s.uncertainties(),
            })
        })
        .collect();
    json!({
        "source": "government_ids reference (formats, check digits and encodings per country, with their sources and uncertainties)",
        "checks": "syntax; check digit where documented; embedded birth date or year and sex decoded and compared with the profile (age window from the build date); region decoded where documented; uniqueness",
        "schemes": schemes,
    })
}

/// How the runs spread over categories, conditions and Discovery positions.
fn runs_summary(runs: &[crate::run_matrix::RunSpec]) -> Value {
    let mut by: BTreeMap<&str, BTreeMap<String, usize>> = BTreeMap::new();
    for r in runs {
        for (k, v) in [
            ("category", &r.category),
            ("guidance", &r.guidance),
            ("pressure", &r.pressure),
            ("order", &r.order.to_string()),
        ] {
            *by.entry(k).or_default().entry(v.clone()).or_default() += 1;
        }
    }
    let positions: BTreeMap<String, BTreeMap<String, usize>> =
        crate::run_matrix::position_counts(runs)
            .into_iter()
            .map(|(p, m)| ((p + 1).to_string(), m))
            .collect();
    json!({
        "per_category": by.get("category"),
        "per_guidance": by.get("guidance"),
        "per_pressure": by.get("pressure"),
        "per_order": by.get("order"),
        "source_type_per_position": positions,
    })
}

fn jsonl<T: Serialize>(items: &[T]) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    for x in items {
        serde_json::to_writer(&mut buf, x)?;
        buf.push(b'\n');
    }
    Ok(buf)
}

pub fn write(inp: &Inputs, work: &Path) -> Result<()> {
    let cfg = &inp.config;
    let pool: Vec<Person> = read_pool(work)?;
    let cal: CalibrationArtifact = read_json(&work.join("calibration.json"))?;
    let sample: SampleArtifact = read_json(&work.join("sample.json"))?;
    let audit: AuditArtifact = read_json(&work.join("seed_audit.json"))?;
    // The sample the bundle holds: after the audit's replacements when the audit ran.
    let final_l1: BTreeMap<String, f64> = match &audit.report {
        Some(r) => r.sample_l1_after_replacement.clone(),
        None => sample.report.sample_l1.clone(),
    };
    let final_total: f64 = final_l1.values().sum();
    let sel = resolve_ids(&pool, &audit.selected_candidate_ids)?;
    let ident: IdentityArtifact = read_json(&work.join("identity.json"))?;
    let contracts: crate::stages::ContractsArtifact = read_json(&work.join("contracts.json"))?;
    let validation: crate::stages::ValidationArtifact = read_json(&work.join("validation.json"))?;
    let profiles: Vec<Profile> = crate::stages::assemble_profiles(inp, work)?;
    let binding: crate::stages::BindingArtifact = read_json(&work.join("binding.json"))?;
    let planning: crate::stages::PlanningArtifact = read_json(&work.join("planning.json"))?;
    let skills: crate::skill_rendering::SkillsArtifact = read_json(&work.join("skills.json"))?;
    let runs: crate::stages::RunsArtifact = read_json(&work.join("runs.json"))?;
    let gates: crate::stages::GatesArtifact = read_json(&work.join("gates.json"))
        .context("the coherence gates have not passed for these artifacts")?;

    // Per-cell target / pool / sample shares for the report.
    let enc = calibration::encode(&inp.margins, &pool);
    let mut margin_results = Vec::new();
    for (m, e) in inp.margins.margins.iter().zip(&enc) {
        let (pmass, _) = calibration::cell_mass(e, &cal.weights);
        let ptotal: f64 = cal.weights.iter().sum();
        let mut smass = vec![0.0; m.cells.len()];
        for &i in &sel {
            if e.cell[i] != calibration::UNLISTED {
                smass[e.cell[i] as usize] += 1.0;
            }
        }
        let entry = inp
            .margins
            .manifest
            .margins
            .iter()
            .find(|x| x.name == m.name)
            .unwrap();
        margin_results.push(MarginResult {
            name: m.name.clone(),
            file: entry.file.clone(),
            fields: m.fields.clone(),
            status: entry.status.clone(),
            pool_l1: cal.ipf.final_l1[&m.name],
            sample_l1: final_l1[&m.name],
            plain_draw_l1: sample.report.plain_draw_l1[&m.name],
            floor_l1: sample.report.floor_l1[&m.name],
            cells: m
                .cells
                .iter()
                .enumerate()
                .map(|(c, cell)| CellRow {
                    cell: cell.clone(),
                    target: m.shares[c],
                    pool: pmass[c] / ptotal,
                    sample: smass[c] / sel.len() as f64,
                })
                .collect(),
        });
    }
    let report = CalibrationReport {
        candidates: cal.candidates.clone(),
        final_total_l1: final_total,
        pool_size: cal.pool_size,
        backfill_rounds: cal.backfill_rounds,
        deficits_per_round: cal.deficits_per_round.clone(),
        ipf: cal.ipf.clone(),
        sampling: sample.report.clone(),
        margins: margin_results,
    };

    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    files.insert("profiles.jsonl".into(), jsonl(&profiles)?);
    files.insert("calibration.json".into(), to_json_pretty(&report)?);
    if audit.enabled {
        files.insert("seed_audit.jsonl".into(), jsonl(&audit.verdicts)?);
    }
    if ident.enabled {
        files.insert(
            "identity_schemes.json".into(),
            to_json_pretty(&identity_schemes(inp))?,
        );
    }
    let content = &inp.content;
    files.insert(
        "taxonomy.json".into(),
        to_json_pretty(&json!({
            "categories": content.categories_doc,
            "sources": content.sources_doc,
            "interaction_skills": content.skills_doc,
            "domains": content.domains.iter().map(|d| &d.item).collect::<Vec<_>>(),
            "reviewers": {"criteria": content.criteria, "personas": content.personas},
            "persona_attributes": content.attributes.item,
            "record_fields": content.record_fields.item,
        }))?,
    );
    files.insert(
        "policies.json".into(),
        to_json_pretty(&json!({
            "guidance": content.guidance.iter().map(|g| &g.item).collect::<Vec<_>>(),
            "pressure": content.pressure.iter().map(|p| &p.item).collect::<Vec<_>>(),
            "labels": content.labels.item,
            "validation": content.rules.item,
            "harness": content.harness.item,
        }))?,
    );
    files.insert("contracts.jsonl".into(), jsonl(&contracts.contracts)?);
    if contracts.reviewed {
        files.insert("votes.jsonl".into(), jsonl(&contracts.votes)?);
        if !contracts.discarded.is_empty() {
            files.insert(
                "contracts_discarded.jsonl".into(),
                jsonl(&contracts.discarded)?,
            );
        }
    }
    files.insert("bindings.jsonl".into(), jsonl(&binding.bindings)?);
    files.insert("personas.jsonl".into(), jsonl(&planning.worlds)?);
    files.insert("payloads.jsonl".into(), jsonl(&planning.payloads)?);
    files.insert("runs.jsonl".into(), jsonl(&runs.runs)?);
    let index: Vec<Value> = skills
        .skills
        .iter()
        .map(|e| {
            let mut v = serde_json::to_value(e).expect("skill entries serialise");
            v["folders"] = json!(inp
                .content
                .guidance
                .iter()
                .map(|g| format!("skills/{}/{}", g.item.id, e.name))
                .collect::<Vec<_>>());
            v
        })
        .collect();
    files.insert("skills.jsonl".into(), jsonl(&index)?);
    for r in &skills.rendered {
        for (name, text) in &r.files {
            files.insert(format!("{}/{name}", r.dir()), text.clone().into_bytes());
        }
    }
    let schema_dir = inp.content.dir.join("schemas/bundle");
    let mut schema_files: Vec<std::path::PathBuf> = std::fs::read_dir(&schema_dir)
        .with_context(|| format!("cannot read {}", schema_dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    schema_files.sort();
    for p in &schema_files {
        let name = p.file_name().unwrap_or_default().to_string_lossy();
        let bytes = std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))?;
        files.insert(format!("schemas/{name}"), bytes);
    }
    files.insert(
        "schemas/profile.schema.json".into(),
        to_json_pretty(&profile_schema(inp))?,
    );
    for entry in &inp.margins.manifest.margins {
        let bytes = std::fs::read(inp.margins.dir.join(&entry.file))?;
        files.insert(format!("margins/{}", entry.file), bytes);
    }

    let mut inputs = BTreeMap::new();
    inputs.insert(
        "config".to_string(),
        BTreeMap::from([(
            inp.config_path.display().to_string(),
            crate::fsio::sha256_file(&inp.config_path)?,
        )]),
    );
    let mut tax_hashes = BTreeMap::new();
    for p in inp.taxonomy.input_files() {
        let rel = p
            .strip_prefix(&inp.taxonomy.dir)
            .unwrap_or(&p)
            .display()
            .to_string();
        tax_hashes.insert(rel, crate::fsio::sha256_file(&p)?);
    }
    inputs.insert("taxonomy".to_string(), tax_hashes);
    inputs.insert("margins".to_string(), inp.margins.input_hashes()?);
    let mut content_hashes = BTreeMap::new();
    for p in inp.content.files.iter().chain(&schema_files) {
        let rel = p
            .strip_prefix(&inp.content.dir)
            .unwrap_or(p)
            .display()
            .to_string();
        content_hashes.insert(rel, crate::fsio::sha256_file(p)?);
    }
    inputs.insert("content".to_string(), content_hashes);

    // Where every input says it came from: the margins' sources and derivations, and the
    // `provenance` statement of each data file that has one.
    let mut data_files = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for p in inp
        .taxonomy
        .input_files()
        .iter()
        .chain(inp.content.files.iter())
    {
        if !seen.insert(p.clone()) || p.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let Ok(v) = serde_json::from_slice::<Value>(&std::fs::read(p)?) else {
            continue;
        };
        if let Some(prov) = v.get("provenance").and_then(|x| x.as_str()) {
            let rel = p
                .strip_prefix(&inp.content.dir)
                .unwrap_or(p)
                .display()
                .to_string();
            data_files.push(json!({"file": rel, "provenance": prov}));
        }
    }
    let provenance = json!({
        "margins": inp.margins.manifest,
        "data_files": data_files,
    });

    let parts: Vec<&crate::llm::LlmSummary> = audit
        .llm
        .iter()
        .chain(ident.llm.iter())
        .chain(contracts.llm.iter())
        .collect();
    let llm_summary = if parts.is_empty() {
        None
    } else {
        Some(crate::llm::merge_summaries(work, &parts)?)
    };
    let manifest_wo_files = json!({
        "bundle_format": FORMAT,
        "bundle_version": cfg.bundle_version,
        "build_date": cfg.date,
        "generator": {"name": "privforge", "version": env!("CARGO_PKG_VERSION")},
        "seed": cfg.seed,
        "config": cfg,
        "config_sha256": cfg.hash(),
        "inputs": inputs,
        "provenance": provenance,
        "counts": {
            "profiles": profiles.len(),
            "candidates": cal.pool_size,
            "margins": inp.margins.margins.len(),
            "contracts": contracts.contracts.len(),
            "votes": contracts.votes.len(),
            "categories": inp.content.categories.len(),
            "skills": skills.skills.len(),
            "skill_folders": skills.rendered.len(),
            "personas": planning.worlds.len(),
            "payloads": planning.payloads.len(),
            "runs": runs.runs.len(),
        },
        "runs": runs_summary(&runs.runs),
        "binding": binding.report,
        "exposure": planning.exposure,
        "gates": {
            "passed": gates.passed,
            "results": gates.results.iter().map(|r| json!({
                "name": r.name, "stage": r.stage, "description": r.description,
                "passed": r.passed, "checked": r.checked, "failures": r.failures_total,
            })).collect::<Vec<_>>(),
        },
        "margins": inp.margins.manifest.margins.iter().map(|m| json!({
            "name": m.name, "file": format!("margins/{}", m.file), "fields": m.fields, "status": m.status,
        })).collect::<Vec<_>>(),
        "seed_audit": audit.report,
        "identity": ident.report,
        "contracts": {"reviewed": contracts.reviewed, "report": contracts.report, "validation": validation},
        "llm": llm_summary,
        "calibration": {
            "max_l1": cal.ipf.max_l1,
            "tolerance": cal.ipf.tolerance,
            "ipf_sweeps": cal.ipf.sweeps,
            "effective_sample_size": cal.ipf.effective_sample_size,
            "sample_l1": final_l1,
            "sample_total_l1": final_total,
            "sample_l1_before_audit": sample.report.sample_l1,
            "plain_draw_l1": sample.report.plain_draw_l1,
            "best_trial_l1": sample.report.best_trial_l1,
            "floor_l1": sample.report.floor_l1,
            "sample_total_l1_before_audit": sample.report.sample_total_l1,
            "plain_draw_total_l1": sample.report.plain_draw_total_l1,
            "floor_total_l1": sample.report.floor_total_l1,
        },
    });
    // The pages and metadata describe the files above; the manifest lists all of them, and
    // SHA256SUMS covers every file including the manifest.
    files.insert(
        "report.html".into(),
        crate::report::render_report(&manifest_wo_files, &report).into_bytes(),
    );
    files.insert(
        "DATA_CARD.md".into(),
        crate::data_card::render(&manifest_wo_files).into_bytes(),
    );
    let croissant = crate::croissant::metadata(&manifest_wo_files, &files);
    let problems = crate::croissant::check(&croissant);
    if !problems.is_empty() {
        anyhow::bail!(
            "croissant.json is not valid Croissant 1.0: {}",
            problems.join("; ")
        );
    }
    files.insert("croissant.json".into(), to_json_pretty(&croissant)?);

    let listing: BTreeMap<String, Value> = files
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                json!({"sha256": sha256_hex(v), "bytes": v.len()}),
            )
        })
        .collect();
    let mut manifest = manifest_wo_files;
    manifest["files"] = serde_json::to_value(listing)?;
    files.insert("manifest.json".into(), to_json_pretty(&manifest)?);
    let sums: String = files
        .iter()
        .map(|(k, v)| format!("{}  {k}\n", sha256_hex(v)))
        .collect();
    files.insert("SHA256SUMS".into(), sums.into_bytes());

    let out = &cfg.paths.output;
    let staging = StagingDir::new(out)?;
    for (name, bytes) in &files {
        let p = staging.path().join(name);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d)?;
        }
        std::fs::write(&p, bytes).with_context(|| format!("cannot write {}", p.display()))?;
    }
    crate::verify::verify(staging.path()).context("the staged bundle fails verification")?;
    staging.commit(out)?;
    eprintln!(
        "bundle: {} ({} files, {} profiles)",
        out.display(),
        files.len(),
        profiles.len()
    );
    Ok(())
}
