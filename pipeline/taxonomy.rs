//! Value sets of the profile fields, loaded from `taxonomy/*.json` and checked against their
//! JSON Schemas in `taxonomy/schemas/`.

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Deserialize)]
pub struct Country {
    pub iso3: String,
    pub iso2: String,
    pub name: String,
    /// Unicode scripts (as `unicode-script` names them) names are commonly written in.
    pub name_scripts: Vec<String>,
    /// ISO 4217 code planned amounts are shown in.
    pub currency: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Band {
    pub label: String,
    pub min: u64,
    pub max: Option<u64>,
}

impl Band {
    pub fn contains(&self, x: u64) -> bool {
        x >= self.min && self.max.is_none_or(|m| x <= m)
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct Categorical {
    pub values: Vec<String>,
    #[serde(default)]
    pub min_age: BTreeMap<String, u8>,
    #[serde(default)]
    pub median_ratio_bounds: Vec<(f64, Option<f64>)>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct AgeRange {
    pub min: u8,
    pub max: u8,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ProfileFields {
    pub seed_fields: Vec<String>,
    pub age: AgeRange,
    pub categorical: BTreeMap<String, Categorical>,
    pub bands: BTreeMap<String, Vec<Band>>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct OccupationGroup {
    pub group: String,
    pub label: String,
    #[serde(default)]
    pub ilo_code: Option<String>,
    #[serde(default)]
    pub min_age: Option<u8>,
    pub titles: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Occupations {
    pub not_employed: OccupationGroup,
    pub groups: Vec<OccupationGroup>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Condition {
    pub value: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct HealthConditions {
    pub physical: Vec<Condition>,
    pub mental: Vec<Condition>,
}

/// The loaded taxonomy plus, per categorical field, its ordered value domain.
#[derive(Debug, Clone)]
pub struct Taxonomy {
    pub dir: PathBuf,
    pub countries: Vec<Country>,
    pub fields: ProfileFields,
    pub occupations: Occupations,
    pub health: HealthConditions,
    domains: BTreeMap<String, Vec<String>>,
    title_group: BTreeMap<String, String>,
}

/// Files of the taxonomy, each with the schema that governs it.
pub const FILES: &[(&str, &str)] = &[
    ("countries.json", "schemas/countries.schema.json"),
    ("profile_fields.json", "schemas/profile_fields.schema.json"),
    ("occupations.json", "schemas/occupations.schema.json"),
    (
        "health_conditions.json",
        "schemas/health_conditions.schema.json",
    ),
];

/// Reads a JSON file and checks it against a schema file, naming the file and JSON path of
/// every violation.
pub fn load_checked_json(file: &Path, schema_file: &Path) -> Result<Value> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{}:{}: invalid JSON: {}", file.display(), e.line(), e))?;
    let schema_text = std::fs::read_to_string(schema_file)
        .with_context(|| format!("cannot read {}", schema_file.display()))?;
    let schema: Value = serde_json::from_str(&schema_text).map_err(|e| {
        anyhow::anyhow!(
            "{}:{}: invalid JSON: {}",
            schema_file.display(),
            e.line(),
            e
        )
    })?;
    check_schema(&value, &schema, &file.display().to_string())?;
    Ok(value)
}

/// Validates `value` against `schema`; the error names `what` and each failing JSON path.
pub fn check_schema(value: &Value, schema: &Value, what: &str) -> Result<()> {
    let validator = jsonschema::validator_for(schema)
        .map_err(|e| anyhow::anyhow!("invalid schema for {what}: {e}"))?;
    let errors: Vec<String> = validator
        .iter_errors(value)
        .take(5)
        .map(|e| {
            let path = e.instance_path.to_string();
            format!(
                "field {}: {}",
                if path.is_empty() {
                    "/".to_string()
                } else {
                    path
                },
                e
            )
        })
        .collect();
    if !errors.is_empty() {
        bail!("{what}: schema violation: {}", errors.join("; "));
    }
    Ok(())
}

/// A loaded document as its Rust type, with an error naming the file.
pub(crate) fn typed<T: for<'de> Deserialize<'de>>(v: Value, file: &Path) -> Result<T> {
    serde_json::from_value(v).with_context(|| format!("{}: unexpected structure", file.display()))
}

impl Taxonomy {
    pub fn load(dir: &Path) -> Result<Self> {
        let mut values = Vec::new();
        for (file, schema) in FILES {
            values.push(load_checked_json(&dir.join(file), &dir.join(schema))?);
        }
        let mut it = values.into_iter();
        #[derive(Deserialize)]
        struct CountryFile {
            countries: Vec<Country>,
        }
        let countries: CountryFile = typed(it.next().unwrap(), &dir.join(FILES[0].0))?;
        let fields: ProfileFields = typed(it.next().unwrap(), &dir.join(FILES[1].0))?;
        let occupations: Occupations = typed(it.next().unwrap(), &dir.join(FILES[2].0))?;
        let health: HealthConditions = typed(it.next().unwrap(), &dir.join(FILES[3].0))?;
        let mut t = Taxonomy {
            dir: dir.to_path_buf(),
            countries: countries.countries,
            fields,
            occupations,
            health,
            domains: BTreeMap::new(),
            title_group: BTreeMap::new(),
        };
        t.index()?;
        Ok(t)
    }

    fn index(&mut self) -> Result<()> {
        let names: Vec<String> = self.countries.iter().map(|c| c.name.clone()).collect();
        let mut d = BTreeMap::new();
        for f in ["citizenship", "current_country", "birth_country"] {
            d.insert(f.to_string(), names.clone());
        }
        for (k, c) in &self.fields.categorical {
            d.insert(k.clone(), c.values.clone());
        }
        for (k, bands) in &self.fields.bands {
            d.insert(k.clone(), bands.iter().map(|b| b.label.clone()).collect());
        }
        let mut groups = vec![self.occupations.not_employed.group.clone()];
        let mut titles = self.occupations.not_employed.titles.clone();
        for g in &self.occupations.groups {
            groups.push(g.group.clone());
            titles.extend(g.titles.iter().cloned());
        }
        for g in std::iter::once(&self.occupations.not_employed).chain(&self.occupations.groups) {
            for t in &g.titles {
                if self
                    .title_group
                    .insert(t.clone(), g.group.clone())
                    .is_some()
                {
                    bail!(
                        "{}: occupation title {t:?} appears twice",
                        self.dir.join("occupations.json").display()
                    );
                }
            }
        }
        d.insert("occupation_group".into(), groups);
        d.insert("occupation".into(), titles);
        d.insert(
            "physical_condition".into(),
            self.health
                .physical
                .iter()
                .map(|c| c.value.clone())
                .collect(),
        );
        d.insert(
            "mental_condition".into(),
            self.health.mental.iter().map(|c| c.value.clone()).collect(),
        );
        for (field, values) in &d {
            let mut seen = std::collections::BTreeSet::new();
            for v in values {
                if !seen.insert(v) {
                    bail!(
                        "taxonomy {}: field {field} lists value {v:?} twice",
                        self.dir.display()
                    );
                }
            }
        }
        for f in &self.fields.seed_fields {
            let known = d.contains_key(f)
                || matches!(f.as_str(), "age" | "current_location" | "birth_location");
            if !known {
                bail!(
                    "{}: seed field {f:?} has no value set",
                    self.dir.join("profile_fields.json").display()
                );
            }
        }
        self.domains = d;
        Ok(())
    }

    /// Ordered values of a categorical field; `None` for fields without a closed value set.
    pub fn domain(&self, field: &str) -> Option<&[String]> {
        self.domains.get(field).map(|v| v.as_slice())
    }

    pub fn bands(&self, field: &str) -> &[Band] {
        self.fields
            .bands
            .get(field)
            .map(|b| b.as_slice())
            .unwrap_or(&[])
    }

    pub fn band_of(&self, field: &str, x: u64) -> Option<&str> {
        self.bands(field)
            .iter()
            .find(|b| b.contains(x))
            .map(|b| b.label.as_str())
    }

    pub fn occupation_group_of(&self, title: &str) -> Option<&str> {
        self.title_group.get(title).map(|s| s.as_str())
    }

    pub fn group_titles(&self, group: &str) -> &[String] {
        std::iter::once(&self.occupations.not_employed)
            .chain(&self.occupations.groups)
            .find(|g| g.group == group)
            .map(|g| g.titles.as_slice())
            .unwrap_or(&[])
    }

    pub fn country_by_name(&self, name: &str) -> Option<&Country> {
        self.countries.iter().find(|c| c.name == name)
    }

    pub fn country_by_iso3(&self, iso3: &str) -> Option<&Country> {
        self.countries
            .iter()
            .find(|c| c.iso3.eq_ignore_ascii_case(iso3))
    }

    /// Youngest age at which a value is plausible (education level, occupation group).
    pub fn min_age(&self, field: &str, value: &str) -> u8 {
        let base = self.fields.age.min;
        match field {
            "occupation_group" => std::iter::once(&self.occupations.not_employed)
                .chain(&self.occupations.groups)
                .find(|g| g.group == value)
                .and_then(|g| g.min_age)
                .unwrap_or(base),
            _ => self
                .fields
                .categorical
                .get(field)
                .and_then(|c| c.min_age.get(value).copied())
                .unwrap_or(base),
        }
    }

    /// Input files with their hashes, for the manifest.
    pub fn input_files(&self) -> Vec<PathBuf> {
        let mut v = Vec::new();
        for (f, s) in FILES {
            v.push(self.dir.join(f));
            v.push(self.dir.join(s));
        }
        // The name lists of the identity fallback.
        if let Ok(rd) = std::fs::read_dir(self.dir.join("names")) {
            let mut names: Vec<PathBuf> = rd
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect();
            names.sort();
            v.extend(names);
        }
        v
    }
}
