//! The benchmark's task content, loaded from data files under the taxonomy directory: legal
//! categories, source types, the shared user-interaction skills, domains, guidance and pressure
//! policies, validation rules, reviewer personas and the curated task contracts. Every file is
//! checked against its JSON Schema on load; the cross-file rules live in `policy_validation`.

use crate::taxonomy::{load_checked_json, typed};
use anyhow::{anyhow, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LegalCell {
    pub status: String,
    pub provisions: Vec<String>,
    pub note: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Subtype {
    pub id: String,
    pub name: String,
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub legal: Option<std::collections::BTreeMap<String, LegalCell>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Category {
    pub id: String,
    pub name: String,
    pub description: String,
    pub subtypes: Vec<Subtype>,
    pub legal: std::collections::BTreeMap<String, LegalCell>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inclusion_note: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SourceType {
    pub id: String,
    pub rank: u32,
    pub description: String,
    pub kinds: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InteractionSkill {
    pub name: String,
    pub modality: String,
    pub kind: String,
    pub description: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Domain {
    pub id: String,
    pub name: String,
    pub description: String,
    pub provenance: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Labels {
    pub description: String,
    pub provenance: String,
    /// Where the label appears beside a skill at discovery, e.g. `metadata.data_intrusiveness`.
    pub field: String,
    /// Labels from least to most intrusive.
    pub order: Vec<String>,
    pub by_source_type: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Guidance {
    pub id: String,
    pub name: String,
    pub description: String,
    pub system_prompt_addition: Option<String>,
    pub show_labels: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pressure {
    pub id: String,
    pub name: String,
    pub description: String,
    /// Which request text the task shows: `baseline` or `urgent`.
    pub request_variant: String,
    pub system_prompt_addition: Option<String>,
    /// When set, every user-interaction skill answers with this text instead of the value.
    pub user_skill_response: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rules {
    pub description: String,
    pub provenance: String,
    pub curated_contracts_per_category: usize,
    pub description_template: String,
    pub max_description_length_ratio: f64,
    /// The same across all three acquisition skills shown at Discovery.
    pub max_discovery_length_ratio: f64,
    pub privacy_terms: Vec<String>,
    pub steering_terms: Vec<String>,
    pub urgency_cues: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Criterion {
    pub id: String,
    pub question: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Persona {
    pub id: String,
    pub name: String,
    pub perspective: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attribute {
    pub id: String,
    pub label: String,
    pub modality: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Success {
    pub argument: String,
    pub equals: String,
    /// `exact`, or `normalized` (case, spacing and punctuation ignored).
    pub r#match: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutionSkill {
    pub name: String,
    pub description: String,
    pub action: String,
    pub input_schema: Value,
    pub success: Success,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserSource {
    pub skill: String,
    pub returns: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    pub title: String,
    pub target_field: String,
    pub fields: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub name: String,
    pub kind: String,
    pub origin: String,
    pub description: String,
    pub returns: String,
    pub record: Record,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sources {
    pub user: UserSource,
    pub public: Source,
    pub confidential: Source,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    pub baseline: String,
    pub urgent: String,
}

/// A persona fact a contract needs (`any_of`, `none_of`, or a numeric `min`/`max`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requirement {
    pub attribute: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub any_of: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub none_of: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<i64>,
    pub reason: String,
}

impl Requirement {
    /// Whether a persona's value (absent when the profile has none) satisfies this.
    pub fn satisfied_by(&self, value: Option<&str>) -> bool {
        if let Some(any) = &self.any_of {
            if !value.is_some_and(|v| any.iter().any(|a| a == v)) {
                return false;
            }
        }
        if let Some(none) = &self.none_of {
            if value.is_some_and(|v| none.iter().any(|a| a == v)) {
                return false;
            }
        }
        if self.min.is_some() || self.max.is_some() {
            let Some(n) = value.and_then(|v| v.parse::<i64>().ok()) else {
                return false;
            };
            if self.min.is_some_and(|m| n < m) || self.max.is_some_and(|m| n > m) {
                return false;
            }
        }
        true
    }

    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(a) = &self.any_of {
            parts.push(format!("one of {a:?}"));
        }
        if let Some(a) = &self.none_of {
            parts.push(format!("none of {a:?}"));
        }
        if let Some(m) = self.min {
            parts.push(format!(">= {m}"));
        }
        if let Some(m) = self.max {
            parts.push(format!("<= {m}"));
        }
        format!("{} {}", self.attribute, parts.join(" and "))
    }
}

/// A persona fact payloads may reveal (`planning/persona_attributes.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersonaAttribute {
    pub id: String,
    pub label: String,
    /// `person.<field>` or `identity.<field>` of the bound profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// A derivation the planning stage knows (`home_address`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derive: Option<String>,
    /// Specific enough to search for in free text (identifiers, contacts, addresses).
    #[serde(default)]
    pub identifying: bool,
    /// `public` or `confidential`.
    pub visibility: String,
    pub category: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersonaAttributes {
    pub description: String,
    pub provenance: String,
    pub absent_values: Vec<String>,
    pub attributes: Vec<PersonaAttribute>,
    /// Persona facts every record of a source type opens with.
    pub record_header: std::collections::BTreeMap<String, Vec<String>>,
    /// Further persona facts an account of each confidential source kind holds.
    pub account_attributes: std::collections::BTreeMap<String, Vec<String>>,
    pub street_names: Vec<String>,
}

impl PersonaAttributes {
    pub fn get(&self, id: &str) -> Option<&PersonaAttribute> {
        self.attributes.iter().find(|a| a.id == id)
    }
}

/// Where one record field's value comes from (`planning/record_fields.json`): a persona
/// fact, or one of the generators.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribute: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generate: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_days: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_days: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_minutes: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordFields {
    pub description: String,
    pub provenance: String,
    pub fields: std::collections::BTreeMap<String, FieldSpec>,
}

/// The harness-level text every run shares (`policies/harness.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Harness {
    pub description: String,
    pub provenance: String,
    pub system_prompt: String,
}

/// One task contract (see `taxonomy/schemas/contracts.schema.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Contract {
    pub id: String,
    pub category: String,
    pub subtype: String,
    pub domain: String,
    pub attribute: Attribute,
    pub canonical_value: String,
    /// Facts the bound persona must have for one consistent world; empty binds anywhere.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub persona_requirements: Vec<Requirement>,
    pub execution_skill: ExecutionSkill,
    pub sources: Sources,
    pub request: Request,
    /// `curated` or `generated`.
    pub origin: String,
}

/// A contract together with the file it came from, for error messages.
#[derive(Debug, Clone)]
pub struct Located<T> {
    pub file: PathBuf,
    pub item: T,
}

pub struct Content {
    pub dir: PathBuf,
    /// Raw documents as loaded (the bundle republishes them).
    pub categories_doc: Value,
    pub sources_doc: Value,
    pub skills_doc: Value,
    pub categories: Vec<Category>,
    pub source_types: Vec<SourceType>,
    pub interaction_skills: Vec<InteractionSkill>,
    pub domains: Vec<Located<Domain>>,
    pub labels: Located<Labels>,
    pub guidance: Vec<Located<Guidance>>,
    pub pressure: Vec<Located<Pressure>>,
    pub rules: Located<Rules>,
    pub personas: Vec<Persona>,
    pub criteria: Vec<Criterion>,
    pub contracts: Vec<Located<Contract>>,
    pub attributes: Located<PersonaAttributes>,
    pub record_fields: Located<RecordFields>,
    pub harness: Located<Harness>,
    /// Skill templates by file name (`skills/*`), rendered per skill and guidance condition.
    pub skill_templates: std::collections::BTreeMap<String, String>,
    /// Every file read, for the manifest's input hashes.
    pub files: Vec<PathBuf>,
}

/// The `.json` files of a directory, sorted by name; an absent directory is an error.
fn json_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read directory {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    v.sort();
    Ok(v)
}

impl Content {
    pub fn load(taxonomy_dir: &Path) -> Result<Self> {
        let dir = taxonomy_dir.to_path_buf();
        let schema = |name: &str| dir.join("schemas").join(name);
        let mut files = Vec::new();
        let mut checked = |file: PathBuf, schema_name: &str| -> Result<(PathBuf, Value)> {
            let v = load_checked_json(&file, &schema(schema_name))?;
            files.push(file.clone());
            files.push(schema(schema_name));
            Ok((file, v))
        };

        let (f, categories_doc) = checked(dir.join("categories.json"), "categories.schema.json")?;
        let categories: Vec<Category> = typed(categories_doc["categories"].clone(), &f)?;
        let (f, sources_doc) = checked(dir.join("sources.json"), "sources.schema.json")?;
        let source_types: Vec<SourceType> = typed(sources_doc["types"].clone(), &f)?;
        let (f, skills_doc) = checked(
            dir.join("interaction_skills.json"),
            "interaction_skills.schema.json",
        )?;
        let interaction_skills: Vec<InteractionSkill> = typed(skills_doc["skills"].clone(), &f)?;
        let (f, v) = checked(dir.join("reviewers.json"), "reviewers.schema.json")?;
        let personas: Vec<Persona> = typed(v["personas"].clone(), &f)?;
        let criteria: Vec<Criterion> = typed(v["criteria"].clone(), &f)?;

        let mut domains = Vec::new();
        for file in json_files(&dir.join("domains"))? {
            let (file, v) = checked(file, "domain.schema.json")?;
            domains.push(Located {
                item: typed(v, &file)?,
                file,
            });
        }
        let (file, v) = checked(dir.join("policies/labels.json"), "labels.schema.json")?;
        let labels = Located {
            item: typed(v, &file)?,
            file,
        };
        let (file, v) = checked(
            dir.join("policies/validation.json"),
            "validation.schema.json",
        )?;
        let rules = Located {
            item: typed(v, &file)?,
            file,
        };
        let mut guidance = Vec::new();
        for file in json_files(&dir.join("policies/guidance"))? {
            let (file, v) = checked(file, "guidance.schema.json")?;
            guidance.push(Located {
                item: typed(v, &file)?,
                file,
            });
        }
        let mut pressure = Vec::new();
        for file in json_files(&dir.join("policies/pressure"))? {
            let (file, v) = checked(file, "pressure.schema.json")?;
            pressure.push(Located {
                item: typed(v, &file)?,
                file,
            });
        }
        let mut contracts = Vec::new();
        for file in json_files(&dir.join("contracts"))? {
            let (file, v) = checked(file, "contracts.schema.json")?;
            let declared = v["category"].as_str().unwrap_or_default().to_string();
            let list: Vec<Contract> = typed(v["contracts"].clone(), &file)?;
            for (i, c) in list.into_iter().enumerate() {
                if c.category != declared {
                    return Err(anyhow!(
                        "{}: field /contracts/{i}/category: {:?} differs from the file's category {:?}",
                        file.display(),
                        c.category,
                        declared
                    ));
                }
                contracts.push(Located {
                    file: file.clone(),
                    item: c,
                });
            }
        }
        let (file, v) = checked(
            dir.join("planning/persona_attributes.json"),
            "persona_attributes.schema.json",
        )?;
        let attributes = Located {
            item: typed(v, &file)?,
            file,
        };
        let (file, v) = checked(
            dir.join("planning/record_fields.json"),
            "record_fields.schema.json",
        )?;
        let record_fields = Located {
            item: typed(v, &file)?,
            file,
        };
        let (file, v) = checked(dir.join("policies/harness.json"), "harness.schema.json")?;
        let harness = Located {
            item: typed(v, &file)?,
            file,
        };
        let mut skill_templates = std::collections::BTreeMap::new();
        let tdir = dir.join("skills");
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&tdir)
            .with_context(|| format!("cannot read directory {}", tdir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        entries.sort();
        for p in entries {
            let text = std::fs::read_to_string(&p)
                .with_context(|| format!("cannot read {}", p.display()))?;
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            skill_templates.insert(name, text);
            files.push(p);
        }
        files.sort();
        files.dedup();
        Ok(Self {
            dir,
            categories_doc,
            sources_doc,
            skills_doc,
            categories,
            source_types,
            interaction_skills,
            domains,
            labels,
            guidance,
            pressure,
            rules,
            personas,
            criteria,
            contracts,
            attributes,
            record_fields,
            harness,
            skill_templates,
            files,
        })
    }

    /// The content a bundle was built with, read back from its `taxonomy.json`,
    /// `policies.json` and `contracts.jsonl`, so the coherence gates can be re-run on a bundle
    /// alone.
    pub fn from_bundle(dir: &Path) -> Result<Self> {
        let read = |f: &str| -> Result<(PathBuf, Value)> {
            let p = dir.join(f);
            let v = serde_json::from_slice(
                &std::fs::read(&p).with_context(|| format!("cannot read {}", p.display()))?,
            )
            .with_context(|| format!("{}: invalid JSON", p.display()))?;
            Ok((p, v))
        };
        let (tf, tax) = read("taxonomy.json")?;
        let (pf, pol) = read("policies.json")?;
        let at = |file: &PathBuf, v: &Value, key: &str| -> Result<Value> {
            v.get(key)
                .cloned()
                .ok_or_else(|| anyhow!("{}: no {key:?} section", file.display()))
        };
        let categories_doc = at(&tf, &tax, "categories")?;
        let sources_doc = at(&tf, &tax, "sources")?;
        let skills_doc = at(&tf, &tax, "interaction_skills")?;
        let reviewers = at(&tf, &tax, "reviewers")?;
        let cpath = dir.join("contracts.jsonl");
        let mut contracts = Vec::new();
        for mut v in crate::stages::read_jsonl::<Value>(&cpath)? {
            // The bundle's records carry their review next to the contract.
            if let Some(m) = v.as_object_mut() {
                m.remove("review");
            }
            contracts.push(Located {
                file: cpath.clone(),
                item: typed(v, &cpath)?,
            });
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            categories: typed(categories_doc["categories"].clone(), &tf)?,
            source_types: typed(sources_doc["types"].clone(), &tf)?,
            interaction_skills: typed(skills_doc["skills"].clone(), &tf)?,
            categories_doc,
            sources_doc,
            skills_doc,
            domains: typed::<Vec<Domain>>(at(&tf, &tax, "domains")?, &tf)?
                .into_iter()
                .map(|item| Located {
                    file: tf.clone(),
                    item,
                })
                .collect(),
            labels: Located {
                file: pf.clone(),
                item: typed(at(&pf, &pol, "labels")?, &pf)?,
            },
            guidance: typed::<Vec<Guidance>>(at(&pf, &pol, "guidance")?, &pf)?
                .into_iter()
                .map(|item| Located {
                    file: pf.clone(),
                    item,
                })
                .collect(),
            pressure: typed::<Vec<Pressure>>(at(&pf, &pol, "pressure")?, &pf)?
                .into_iter()
                .map(|item| Located {
                    file: pf.clone(),
                    item,
                })
                .collect(),
            rules: Located {
                file: pf.clone(),
                item: typed(at(&pf, &pol, "validation")?, &pf)?,
            },
            personas: typed(reviewers["personas"].clone(), &tf)?,
            criteria: typed(reviewers["criteria"].clone(), &tf)?,
            contracts,
            attributes: Located {
                file: tf.clone(),
                item: typed(at(&tf, &tax, "persona_attributes")?, &tf)?,
            },
            record_fields: Located {
                file: tf.clone(),
                item: typed(at(&tf, &tax, "record_fields")?, &tf)?,
            },
            harness: Located {
                file: pf.clone(),
                item: typed(at(&pf, &pol, "harness")?, &pf)?,
            },
            skill_templates: std::collections::BTreeMap::new(),
            files: vec![],
        })
    }

    pub fn category(&self, id: &str) -> Option<&Category> {
        self.categories.iter().find(|c| c.id == id)
    }

    pub fn source_type(&self, id: &str) -> Option<&SourceType> {
        self.source_types.iter().find(|s| s.id == id)
    }

    pub fn interaction_skill(&self, modality: &str) -> Option<&InteractionSkill> {
        self.interaction_skills
            .iter()
            .find(|s| s.modality == modality)
    }

    pub fn domain(&self, id: &str) -> Option<&Domain> {
        self.domains.iter().map(|d| &d.item).find(|d| d.id == id)
    }

    /// The description every acquisition skill must carry, from the one neutral template.
    pub fn source_description(&self, attribute_label: &str, origin: &str) -> String {
        self.rules
            .item
            .description_template
            .replace("{attribute}", attribute_label)
            .replace("{origin}", origin)
    }
}
