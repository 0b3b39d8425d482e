//! The population margins a build calibrates to: `population-margins/margins.toml` plus one
//! CSV per margin, the city catalog and the proposal tables. Everything is validated before
//! any stage runs, with errors that name the file and line.

use crate::taxonomy::{check_schema, Taxonomy};
use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// Tolerance for shares summing to one and for agreement of shared sub-margins.
pub const SUM_TOLERANCE: f64 = 1e-6;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Official,
    Derived,
    Assumption,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceRef {
    pub id: String,
    pub title: String,
    pub publisher: String,
    pub edition: String,
    pub url: String,
    pub licence: String,
    pub extract: String,
    pub sha256: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MarginEntry {
    pub name: String,
    pub file: String,
    pub fields: Vec<String>,
    pub status: Status,
    pub licence: String,
    pub derivation: String,
    #[serde(default)]
    pub assumptions: Vec<String>,
    #[serde(default)]
    pub sources: Vec<SourceRef>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableEntry {
    pub name: String,
    pub file: String,
    pub status: Status,
    pub licence: String,
    pub derivation: String,
    #[serde(default)]
    pub sources: Vec<SourceRef>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MarginsManifest {
    pub generated_by: String,
    pub frame: String,
    pub reference_year: u32,
    pub catalog: TableEntry,
    pub age_in_group: TableEntry,
    #[serde(rename = "margin")]
    pub margins: Vec<MarginEntry>,
}

/// One margin: target shares over the cells of its fields.
#[derive(Debug, Clone)]
pub struct Margin {
    pub name: String,
    pub file: PathBuf,
    pub fields: Vec<String>,
    pub cells: Vec<Vec<String>>,
    /// Normalised to sum exactly to one.
    pub shares: Vec<f64>,
    index: HashMap<Vec<String>, usize>,
}

impl Margin {
    pub fn cell_of(&self, values: &[&str]) -> Option<usize> {
        let key: Vec<String> = values.iter().map(|s| s.to_string()).collect();
        self.index.get(&key).copied()
    }

    /// Cell of a person; `None` when the person's combination is not listed (target 0).
    pub fn cell_of_person(&self, p: &crate::profile::Person) -> Option<usize> {
        let vals: Vec<&str> = self.fields.iter().map(|f| p.get(f).unwrap_or("")).collect();
        self.cell_of(&vals)
    }

    /// L1 distance between `shares` and the normalised `mass` per cell.
    pub fn l1(&self, mass: &[f64]) -> f64 {
        let total: f64 = mass.iter().sum();
        if total <= 0.0 {
            return self.shares.iter().sum();
        }
        self.shares
            .iter()
            .zip(mass)
            .map(|(t, m)| (m / total - t).abs())
            .sum()
    }
}

#[derive(Debug, Clone)]
pub struct City {
    pub geonameid: u64,
    pub name: String,
    pub country: String,
    pub population: u64,
    pub size_class: String,
    pub location: String,
    /// GeoNames first-level administrative division code.
    pub admin1: String,
}

/// Cities by "City, Country" location, by country and by (country, size class).
#[derive(Debug, Clone, Default)]
pub struct CityCatalog {
    pub cities: Vec<City>,
    by_location: HashMap<String, usize>,
    by_country: BTreeMap<String, Vec<usize>>,
    by_class: BTreeMap<(String, String), Vec<usize>>,
}

impl CityCatalog {
    pub fn get(&self, location: &str) -> Option<&City> {
        self.by_location.get(location).map(|&i| &self.cities[i])
    }
    pub fn in_country(&self, country: &str) -> Vec<&City> {
        self.by_country
            .get(country)
            .map(|v| v.iter().map(|&i| &self.cities[i]).collect())
            .unwrap_or_default()
    }
    pub fn in_class(&self, country: &str, class: &str) -> Vec<&City> {
        self.by_class
            .get(&(country.to_string(), class.to_string()))
            .map(|v| v.iter().map(|&i| &self.cities[i]).collect())
            .unwrap_or_default()
    }
    pub fn locations(&self) -> Vec<String> {
        self.cities.iter().map(|c| c.location.clone()).collect()
    }
}

/// Share of each single year of age within its age group.
#[derive(Debug, Clone, Default)]
pub struct AgeInGroup {
    pub by_group: BTreeMap<String, Vec<(u8, f64)>>,
}

#[derive(Debug, Clone)]
pub struct MarginSet {
    pub dir: PathBuf,
    pub manifest: MarginsManifest,
    pub margins: Vec<Margin>,
    pub cities: CityCatalog,
    pub age_in_group: AgeInGroup,
}

pub const MANIFEST: &str = "margins.toml";
pub const MANIFEST_SCHEMA: &str = "schemas/margins.schema.json";

fn parse_share(raw: &str, file: &Path, line: u64) -> Result<f64> {
    let v: f64 = raw
        .trim()
        .parse()
        .map_err(|_| anyhow!("{}:{line}: share {raw:?} is not a number", file.display()))?;
    if !v.is_finite() {
        bail!("{}:{line}: share {raw:?} is not finite", file.display());
    }
    if v < 0.0 {
        bail!("{}:{line}: share {v} is negative", file.display());
    }
    Ok(v)
}

fn open_csv(path: &Path) -> Result<(csv::Reader<std::fs::File>, Vec<String>)> {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_path(path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let headers: Vec<String> = rdr
        .headers()
        .with_context(|| format!("{}:1: cannot read header", path.display()))?
        .iter()
        .map(|s| s.trim().to_string())
        .collect();
    Ok((rdr, headers))
}

fn check_sum(total: f64, file: &Path) -> Result<()> {
    if (total - 1.0).abs() > SUM_TOLERANCE {
        bail!(
            "{}: shares sum to {total}, expected 1 (tolerance {SUM_TOLERANCE})",
            file.display()
        );
    }
    Ok(())
}

impl MarginSet {
    pub fn load(dir: &Path, tax: &Taxonomy) -> Result<Self> {
        let mpath = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&mpath)
            .with_context(|| format!("cannot read {}", mpath.display()))?;
        let raw: toml::Value = toml::from_str(&text).map_err(|e| {
            anyhow!(
                "{}: invalid TOML: {}",
                mpath.display(),
                e.to_string().trim()
            )
        })?;
        let json = serde_json::to_value(&raw)?;
        let schema_path = dir.join(MANIFEST_SCHEMA);
        let schema: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(&schema_path)
                .with_context(|| format!("cannot read {}", schema_path.display()))?,
        )
        .with_context(|| format!("{}: invalid JSON", schema_path.display()))?;
        check_schema(&json, &schema, &mpath.display().to_string())?;
        let manifest: MarginsManifest = serde_json::from_value(json)
            .with_context(|| format!("{}: unexpected structure", mpath.display()))?;

        let cities = load_cities(&dir.join(&manifest.catalog.file), tax)?;
        let age_in_group = load_age_in_group(&dir.join(&manifest.age_in_group.file), tax)?;
        let mut margins = Vec::new();
        let mut names = std::collections::BTreeSet::new();
        for entry in &manifest.margins {
            if !names.insert(entry.name.clone()) {
                bail!(
                    "{}: margin {:?} is defined twice",
                    mpath.display(),
                    entry.name
                );
            }
            margins.push(load_margin(dir, entry, tax, &cities, &mpath)?);
        }
        let set = MarginSet {
            dir: dir.to_path_buf(),
            manifest,
            margins,
            cities,
            age_in_group,
        };
        set.check_consistency()?;
        Ok(set)
    }

    /// Margins that share fields must agree on the distribution of those fields, otherwise
    /// no weighting can satisfy both and IPF would cycle without converging.
    pub fn check_consistency(&self) -> Result<()> {
        for (i, a) in self.margins.iter().enumerate() {
            for b in &self.margins[i + 1..] {
                let shared: Vec<String> = a
                    .fields
                    .iter()
                    .filter(|f| b.fields.contains(f))
                    .cloned()
                    .collect();
                if shared.is_empty() {
                    continue;
                }
                let ma = sub_margin(a, &shared);
                let mb = sub_margin(b, &shared);
                let mut keys: Vec<&Vec<String>> = ma.keys().chain(mb.keys()).collect();
                keys.sort();
                keys.dedup();
                for k in keys {
                    let x = ma.get(k).copied().unwrap_or(0.0);
                    let y = mb.get(k).copied().unwrap_or(0.0);
                    if (x - y).abs() > SUM_TOLERANCE {
                        bail!(
                            "inconsistent margins: {} ({}) and {} ({}) disagree on {} = {}: {x} vs {y}; IPF cannot converge to both",
                            a.name,
                            a.file.display(),
                            b.name,
                            b.file.display(),
                            shared.join(" x "),
                            k.join(" | ")
                        );
                    }
                }
            }
        }
        Ok(())
    }

    /// sha256 of every input file of the margin set, keyed by path relative to its directory.
    pub fn input_hashes(&self) -> Result<BTreeMap<String, String>> {
        let mut files = vec![MANIFEST.to_string(), MANIFEST_SCHEMA.to_string()];
        files.push(self.manifest.catalog.file.clone());
        files.push(self.manifest.age_in_group.file.clone());
        files.extend(self.manifest.margins.iter().map(|m| m.file.clone()));
        let mut out = BTreeMap::new();
        for f in files {
            out.insert(f.clone(), crate::fsio::sha256_file(&self.dir.join(&f))?);
        }
        Ok(out)
    }

    pub fn get(&self, name: &str) -> Option<&Margin> {
        self.margins.iter().find(|m| m.name == name)
    }
}

fn sub_margin(m: &Margin, fields: &[String]) -> BTreeMap<Vec<String>, f64> {
    let idx: Vec<usize> = fields
        .iter()
        .map(|f| m.fields.iter().position(|g| g == f).unwrap())
        .collect();
    let mut out = BTreeMap::new();
    for (cell, s) in m.cells.iter().zip(&m.shares) {
        let key: Vec<String> = idx.iter().map(|&i| cell[i].clone()).collect();
        *out.entry(key).or_insert(0.0) += s;
    }
    out
}

/// Fields a margin may name: categorical profile fields with a closed value set.
pub fn field_domain(field: &str, tax: &Taxonomy, cities: &CityCatalog) -> Option<Vec<String>> {
    match field {
        "current_location" | "birth_location" => Some(cities.locations()),
        _ => tax.domain(field).map(|d| d.to_vec()),
    }
}

fn load_margin(
    dir: &Path,
    entry: &MarginEntry,
    tax: &Taxonomy,
    cities: &CityCatalog,
    mpath: &Path,
) -> Result<Margin> {
    let path = dir.join(&entry.file);
    let mut domains = Vec::new();
    for f in &entry.fields {
        let d = field_domain(f, tax, cities).ok_or_else(|| {
            anyhow!(
                "{}: margin {:?} names unknown field {f:?} (known: categorical profile fields such as current_country, age_group, sex, education_level)",
                mpath.display(),
                entry.name
            )
        })?;
        domains.push(d.into_iter().collect::<std::collections::HashSet<String>>());
    }
    let (mut rdr, headers) = open_csv(&path)?;
    let mut expected: Vec<String> = entry.fields.clone();
    expected.push("share".into());
    for col in &expected {
        if !headers.contains(col) {
            bail!(
                "{}:1: missing column {col:?} (expected columns: {})",
                path.display(),
                expected.join(",")
            );
        }
    }
    if headers != expected {
        bail!(
            "{}:1: columns are {}, expected exactly {}",
            path.display(),
            headers.join(","),
            expected.join(",")
        );
    }
    let mut cells = Vec::new();
    let mut shares = Vec::new();
    let mut index = HashMap::new();
    for (i, rec) in rdr.records().enumerate() {
        let line = i as u64 + 2;
        let rec = rec.map_err(|e| anyhow!("{}:{line}: {e}", path.display()))?;
        if rec.len() != expected.len() {
            bail!(
                "{}:{line}: {} columns, expected {}",
                path.display(),
                rec.len(),
                expected.len()
            );
        }
        let mut cell = Vec::new();
        for (j, f) in entry.fields.iter().enumerate() {
            let v = rec[j].trim();
            if !domains[j].contains(v) {
                bail!(
                    "{}:{line}: unknown value {v:?} for field {f:?}",
                    path.display()
                );
            }
            cell.push(v.to_string());
        }
        let share = parse_share(&rec[entry.fields.len()], &path, line)?;
        if index.insert(cell.clone(), cells.len()).is_some() {
            bail!(
                "{}:{line}: cell {} is listed twice",
                path.display(),
                cell.join(" | ")
            );
        }
        cells.push(cell);
        shares.push(share);
    }
    if cells.is_empty() {
        bail!("{}: no rows", path.display());
    }
    let total: f64 = shares.iter().sum();
    check_sum(total, &path)?;
    for s in shares.iter_mut() {
        *s /= total;
    }
    Ok(Margin {
        name: entry.name.clone(),
        file: path,
        fields: entry.fields.clone(),
        cells,
        shares,
        index,
    })
}

fn load_cities(path: &Path, tax: &Taxonomy) -> Result<CityCatalog> {
    let (mut rdr, headers) = open_csv(path)?;
    let expected = [
        "geonameid",
        "city",
        "iso3",
        "country",
        "admin1",
        "population",
        "size_class",
    ];
    if headers != expected {
        bail!(
            "{}:1: columns are {}, expected {}",
            path.display(),
            headers.join(","),
            expected.join(",")
        );
    }
    let mut cat = CityCatalog::default();
    for (i, rec) in rdr.records().enumerate() {
        let line = i as u64 + 2;
        let rec = rec.map_err(|e| anyhow!("{}:{line}: {e}", path.display()))?;
        let num = |k: usize, what: &str| -> Result<u64> {
            rec[k].trim().parse().map_err(|_| {
                anyhow!(
                    "{}:{line}: {what} {:?} is not a whole number",
                    path.display(),
                    &rec[k]
                )
            })
        };
        let geonameid = num(0, "geonameid")?;
        let population = num(5, "population")?;
        let name = rec[1].trim().to_string();
        let country = rec[3].trim().to_string();
        if name.is_empty() || name.contains(',') {
            bail!(
                "{}:{line}: city name {name:?} is empty or contains a comma",
                path.display()
            );
        }
        if tax.country_by_name(&country).is_none() {
            bail!("{}:{line}: unknown country {country:?}", path.display());
        }
        let class = rec[6].trim().to_string();
        if tax.band_of("current_city_size", population) != Some(class.as_str()) {
            bail!(
                "{}:{line}: size_class {class:?} does not match population {population}",
                path.display()
            );
        }
        let location = format!("{name}, {country}");
        let idx = cat.cities.len();
        if cat.by_location.insert(location.clone(), idx).is_some() {
            bail!(
                "{}:{line}: location {location:?} is listed twice",
                path.display()
            );
        }
        cat.by_country.entry(country.clone()).or_default().push(idx);
        cat.by_class
            .entry((country.clone(), class.clone()))
            .or_default()
            .push(idx);
        cat.cities.push(City {
            geonameid,
            name,
            country,
            population,
            size_class: class,
            location,
            admin1: rec[4].trim().to_string(),
        });
    }
    for c in &tax.countries {
        if !cat.by_country.contains_key(&c.name) {
            bail!("{}: no city for country {:?}", path.display(), c.name);
        }
    }
    Ok(cat)
}

fn load_age_in_group(path: &Path, tax: &Taxonomy) -> Result<AgeInGroup> {
    let (mut rdr, headers) = open_csv(path)?;
    if headers != ["age_group", "age", "share"] {
        bail!(
            "{}:1: columns are {}, expected age_group,age,share",
            path.display(),
            headers.join(",")
        );
    }
    let mut out = AgeInGroup::default();
    for (i, rec) in rdr.records().enumerate() {
        let line = i as u64 + 2;
        let rec = rec.map_err(|e| anyhow!("{}:{line}: {e}", path.display()))?;
        let group = rec[0].trim().to_string();
        let age: u8 = rec[1].trim().parse().map_err(|_| {
            anyhow!(
                "{}:{line}: age {:?} is not a whole number",
                path.display(),
                &rec[1]
            )
        })?;
        if tax.band_of("age_group", age as u64) != Some(group.as_str()) {
            bail!(
                "{}:{line}: age {age} is not in age group {group:?}",
                path.display()
            );
        }
        let share = parse_share(&rec[2], path, line)?;
        out.by_group.entry(group).or_default().push((age, share));
    }
    for band in tax.bands("age_group") {
        let rows = out
            .by_group
            .get(&band.label)
            .ok_or_else(|| anyhow!("{}: no rows for age group {:?}", path.display(), band.label))?;
        let total: f64 = rows.iter().map(|r| r.1).sum();
        check_sum(
            total,
            &path.with_file_name(format!(
                "{} (age group {})",
                path.file_name().unwrap().to_string_lossy(),
                band.label
            )),
        )?;
    }
    Ok(out)
}
