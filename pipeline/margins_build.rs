//! `privforge margins build`: derives the committed population margins from the open
//! statistical extracts (whose sha256 must match `population-margins/sources/sources.toml`),
//! the transcribed PrivacyTrace country weights and the documented assumption tables.
//! Every margin is built as P(country) x P(rest | country) so shared sub-margins agree exactly.

use crate::fsio::{sha256_file, write_atomic};
use crate::margins::{MarginEntry, MarginsManifest, SourceRef, Status, TableEntry};
use crate::taxonomy::Taxonomy;
use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;
use statrs::distribution::{ContinuousCDF, Normal};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceSpec {
    id: String,
    title: String,
    publisher: String,
    edition: String,
    url: String,
    licence: String,
    extract: String,
    /// `committed` (under population-margins/sources/) or `sources-dir` (the --sources argument).
    location: String,
    sha256: String,
}

#[derive(Debug, Deserialize)]
struct SourcesFile {
    source: Vec<SourceSpec>,
}

/// Zero cells in extracts rounded to two decimals stand for values in [0, 0.005); they are
/// replaced by the midpoint so that rounding does not create structural zeros.
const ROUNDED_ZERO: f64 = 0.0025;

/// Assumed split of the population with at least a bachelor's degree (no source available).
const BACHELOR_SPLIT: [(&str, f64); 3] =
    [("bachelor", 0.67), ("master", 0.30), ("doctorate", 0.03)];

/// Five-year WPP group: first age, last age, population (thousands).
type AgeSpan = (u32, u32, f64);

struct Sources {
    specs: BTreeMap<String, SourceSpec>,
    paths: BTreeMap<String, PathBuf>,
}

impl Sources {
    fn load(margins_dir: &Path, sources_dir: &Path) -> Result<Self> {
        let spath = margins_dir.join("sources/sources.toml");
        let text = std::fs::read_to_string(&spath)
            .with_context(|| format!("cannot read {}", spath.display()))?;
        let file: SourcesFile = toml::from_str(&text)
            .map_err(|e| anyhow!("{}: {}", spath.display(), e.to_string().trim()))?;
        let mut specs = BTreeMap::new();
        let mut paths = BTreeMap::new();
        for s in file.source {
            let path = match s.location.as_str() {
                "committed" => margins_dir.join("sources").join(&s.extract),
                "sources-dir" => sources_dir.join(&s.extract),
                other => bail!(
                    "{}: source {}: unknown location {other:?}",
                    spath.display(),
                    s.id
                ),
            };
            let got = sha256_file(&path)?;
            if got != s.sha256 {
                bail!(
                    "{}: sha256 {got} differs from the one recorded for source {:?} in {} ({}); the extract changed",
                    path.display(),
                    s.id,
                    spath.display(),
                    s.sha256
                );
            }
            paths.insert(s.id.clone(), path);
            specs.insert(s.id.clone(), s);
        }
        Ok(Sources { specs, paths })
    }

    fn path(&self, id: &str) -> Result<&Path> {
        self.paths
            .get(id)
            .map(|p| p.as_path())
            .ok_or_else(|| anyhow!("sources.toml has no source {id:?}"))
    }

    fn refs(&self, ids: &[&str]) -> Vec<SourceRef> {
        ids.iter()
            .filter_map(|id| self.specs.get(*id))
            .map(|s| SourceRef {
                id: s.id.clone(),
                title: s.title.clone(),
                publisher: s.publisher.clone(),
                edition: s.edition.clone(),
                url: s.url.clone(),
                licence: s.licence.clone(),
                extract: s.extract.clone(),
                sha256: s.sha256.clone(),
            })
            .collect()
    }
}

/// Rows of a CSV as header-keyed maps, with the line number of each row.
fn read_rows(path: &Path) -> Result<Vec<(u64, BTreeMap<String, String>)>> {
    let mut rdr =
        csv::Reader::from_path(path).with_context(|| format!("cannot read {}", path.display()))?;
    let headers: Vec<String> = rdr
        .headers()?
        .iter()
        .map(|h| h.trim().to_string())
        .collect();
    let mut out = Vec::new();
    for (i, rec) in rdr.records().enumerate() {
        let line = i as u64 + 2;
        let rec = rec.map_err(|e| anyhow!("{}:{line}: {e}", path.display()))?;
        let map = headers
            .iter()
            .cloned()
            .zip(rec.iter().map(|s| s.trim().to_string()))
            .collect();
        out.push((line, map));
    }
    Ok(out)
}

fn col<'a>(
    row: &'a BTreeMap<String, String>,
    name: &str,
    path: &Path,
    line: u64,
) -> Result<&'a str> {
    row.get(name)
        .map(|s| s.as_str())
        .ok_or_else(|| anyhow!("{}:{line}: missing column {name:?}", path.display()))
}

fn num(row: &BTreeMap<String, String>, name: &str, path: &Path, line: u64) -> Result<f64> {
    let raw = col(row, name, path, line)?;
    raw.parse::<f64>()
        .map_err(|_| anyhow!("{}:{line}: {name} {raw:?} is not a number", path.display()))
}

/// Like [`num`] but an empty cell or NaN reads as zero (used where the source marks
/// negligible counts that way).
fn num_or_zero(row: &BTreeMap<String, String>, name: &str, path: &Path, line: u64) -> Result<f64> {
    let raw = col(row, name, path, line)?;
    if raw.is_empty() || raw.eq_ignore_ascii_case("nan") {
        return Ok(0.0);
    }
    raw.parse::<f64>()
        .map_err(|_| anyhow!("{}:{line}: {name} {raw:?} is not a number", path.display()))
}

fn normalise(v: &mut [f64]) -> Result<()> {
    let t: f64 = v.iter().sum();
    if t.is_nan() || t <= 0.0 {
        bail!("cannot normalise a distribution with total {t}");
    }
    v.iter_mut().for_each(|x| *x /= t);
    Ok(())
}

/// A margin being assembled: rows of (cell values, share).
struct Table {
    entry: MarginEntry,
    rows: Vec<(Vec<String>, f64)>,
}

impl Table {
    fn csv(&self) -> Vec<u8> {
        let mut w = csv::Writer::from_writer(Vec::new());
        let mut header = self.entry.fields.clone();
        header.push("share".into());
        w.write_record(&header).unwrap();
        for (cell, share) in &self.rows {
            let mut rec = cell.clone();
            rec.push(format!("{share}"));
            w.write_record(&rec).unwrap();
        }
        w.into_inner().unwrap()
    }
}

pub struct BuildSummary {
    pub margins: Vec<(String, usize, Status)>,
    pub cities: usize,
    pub dropped_duplicate_cities: usize,
    pub wpp_vs_table5_max_abs_diff: f64,
}

pub fn build(sources_dir: &Path, margins_dir: &Path, taxonomy_dir: &Path) -> Result<BuildSummary> {
    let tax = Taxonomy::load(taxonomy_dir)?;
    let src = Sources::load(margins_dir, sources_dir)?;
    let countries: Vec<(String, String, String)> = tax
        .countries
        .iter()
        .map(|c| (c.iso3.clone(), c.iso2.clone(), c.name.clone()))
        .collect();
    let sexes = tax.domain("sex").unwrap().to_vec();
    let age_bands = tax.bands("age_group").to_vec();

    // Country weights (PrivacyTrace Table 5), normalised.
    let t5_path = src.path("privacytrace_table5")?;
    let mut weight: BTreeMap<String, f64> = BTreeMap::new();
    for (line, row) in read_rows(t5_path)? {
        let iso = col(&row, "iso3", t5_path, line)?.to_string();
        if tax.country_by_iso3(&iso).is_none() {
            bail!("{}:{line}: unknown country {iso:?}", t5_path.display());
        }
        weight.insert(iso, num(&row, "weight_percent", t5_path, line)?);
    }
    for (iso, _, _) in &countries {
        if !weight.contains_key(iso) {
            bail!("{}: no weight for {iso}", t5_path.display());
        }
    }
    let wsum: f64 = weight.values().sum();
    weight.values_mut().for_each(|w| *w /= wsum);
    let w = |iso: &str| weight[iso];

    // WPP: population by single-year band overlap, per country, sex.
    let wpp_path = src.path("wpp2024")?;
    // iso -> sex -> Vec<(lo, hi, pop)>
    let mut wpp: BTreeMap<String, BTreeMap<String, Vec<AgeSpan>>> = BTreeMap::new();
    for (line, row) in read_rows(wpp_path)? {
        let iso = col(&row, "iso3", wpp_path, line)?.to_string();
        let g = col(&row, "age_group", wpp_path, line)?;
        let (lo, hi) = if let Some(x) = g.strip_suffix('+') {
            let lo: u32 = x
                .parse()
                .map_err(|_| anyhow!("{}:{line}: bad age group {g:?}", wpp_path.display()))?;
            (lo, lo + 4)
        } else {
            let (a, b) = g
                .split_once('-')
                .ok_or_else(|| anyhow!("{}:{line}: bad age group {g:?}", wpp_path.display()))?;
            (
                a.parse()
                    .map_err(|_| anyhow!("{}:{line}: bad age group {g:?}", wpp_path.display()))?,
                b.parse()
                    .map_err(|_| anyhow!("{}:{line}: bad age group {g:?}", wpp_path.display()))?,
            )
        };
        for (sex, colname) in [
            ("male", "pop_male_thousands"),
            ("female", "pop_female_thousands"),
        ] {
            let p = num(&row, colname, wpp_path, line)?;
            wpp.entry(iso.clone())
                .or_default()
                .entry(sex.into())
                .or_default()
                .push((lo, hi, p));
        }
    }
    // Population of a country and sex at single year `age`, assuming uniform ages in a 5-year group.
    let pop_at = |iso: &str, sex: &str, age: u32| -> f64 {
        wpp.get(iso)
            .and_then(|m| m.get(sex))
            .and_then(|v| v.iter().find(|(lo, hi, _)| age >= *lo && age <= *hi))
            .map(|(lo, hi, p)| p / (hi - lo + 1) as f64)
            .unwrap_or(0.0)
    };
    let amin = tax.fields.age.min as u32;
    let amax = tax.fields.age.max as u32;
    // P(age_group, sex | country)
    let mut age_sex: BTreeMap<String, Vec<(String, String, f64)>> = BTreeMap::new();
    let mut wpp_total: BTreeMap<String, f64> = BTreeMap::new();
    for (iso, _, _) in &countries {
        if !wpp.contains_key(iso) {
            bail!("{}: no rows for {iso}", wpp_path.display());
        }
        let mut cells = Vec::new();
        for b in &age_bands {
            let hi = b.max.map(|m| m as u32).unwrap_or(amax);
            for s in &sexes {
                let p: f64 = (b.min as u32..=hi).map(|a| pop_at(iso, s, a)).sum();
                cells.push((b.label.clone(), s.clone(), p));
            }
        }
        let total: f64 = cells.iter().map(|c| c.2).sum();
        wpp_total.insert(iso.clone(), total);
        for c in cells.iter_mut() {
            c.2 /= total;
        }
        age_sex.insert(iso.clone(), cells);
    }
    let wpp_sum: f64 = wpp_total.values().sum();
    let wpp_vs_t5 = countries
        .iter()
        .map(|(iso, _, _)| (wpp_total[iso] / wpp_sum - w(iso)).abs())
        .fold(0.0, f64::max);
    let p_sex = |iso: &str, sex: &str| -> f64 {
        age_sex[iso]
            .iter()
            .filter(|c| c.1 == sex)
            .map(|c| c.2)
            .sum()
    };

    let mut tables: Vec<Table> = Vec::new();
    let entry = |name: &str,
                 fields: &[&str],
                 status: Status,
                 ids: &[&str],
                 licence: &str,
                 derivation: String,
                 assumptions: Vec<String>| MarginEntry {
        name: name.into(),
        file: format!("{name}.csv"),
        fields: fields.iter().map(|s| s.to_string()).collect(),
        status,
        licence: licence.into(),
        derivation,
        assumptions,
        sources: src.refs(ids),
    };

    // 1. country
    tables.push(Table {
        entry: entry(
            "country",
            &["current_country"],
            Status::Derived,
            &["privacytrace_table5", "wpp2024"],
            "figures quoted with attribution (PrivacyTrace); underlying WPP 2024 data CC BY 3.0 IGO",
            format!(
                "Country weights of PrivacyTrace Table 5 (percent), renormalised to sum to 1. Cross-check: shares of the population aged {amin}-{amax} computed here from WPP 2024 differ from them by at most {wpp_vs_t5:.2e} (absolute)."
            ),
            vec![],
        ),
        rows: countries.iter().map(|(iso, _, name)| (vec![name.clone()], w(iso))).collect(),
    });

    // 2. country x age group x sex
    let mut rows = Vec::new();
    for (iso, _, name) in &countries {
        for (g, s, p) in &age_sex[iso] {
            rows.push((vec![name.clone(), g.clone(), s.clone()], w(iso) * p));
        }
    }
    tables.push(Table {
        entry: entry(
            "country_age_sex",
            &["current_country", "age_group", "sex"],
            Status::Derived,
            &["wpp2024", "privacytrace_table5"],
            "CC BY 3.0 IGO",
            format!("P(age group, sex | country) from WPP 2024 medium variant, 1 July 2025, restricted to ages {amin}-{amax}; five-year groups that straddle a band edge (15-19, 80-84) are split assuming ages are uniform within the group. Multiplied by the country margin."),
            vec!["Single years of age are uniformly distributed within each WPP five-year group.".into()],
        ),
        rows,
    });

    // Proposal table: single year of age within its group, pooled over the frame.
    let mut age_rows: Vec<(String, u8, f64)> = Vec::new();
    for b in &age_bands {
        let hi = b.max.map(|m| m as u32).unwrap_or(amax);
        let mut ys: Vec<(u8, f64)> = (b.min as u32..=hi)
            .map(|a| {
                let p: f64 = countries
                    .iter()
                    .map(|(iso, _, _)| {
                        w(iso) * sexes.iter().map(|s| pop_at(iso, s, a)).sum::<f64>()
                            / wpp_total[iso]
                    })
                    .sum();
                (a as u8, p)
            })
            .collect();
        let t: f64 = ys.iter().map(|y| y.1).sum();
        ys.iter_mut().for_each(|y| y.1 /= t);
        age_rows.extend(ys.into_iter().map(|(a, p)| (b.label.clone(), a, p)));
    }

    // 3. education
    let wic_path = src.path("wic_edstats")?;
    let ba_path = src.path("wdi_bachelor")?;
    let mut ba: BTreeMap<String, f64> = BTreeMap::new();
    for (line, row) in read_rows(ba_path)? {
        ba.insert(
            col(&row, "iso3", ba_path, line)?.to_uppercase(),
            num(&row, "se_ter_cuat_ba_zs_pct", ba_path, line)? / 100.0,
        );
    }
    let wic_levels = [
        "no_education",
        "incomplete_primary",
        "primary",
        "lower_secondary",
        "upper_secondary",
        "post_secondary",
    ];
    let mut wic: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
    for (line, row) in read_rows(wic_path)? {
        if col(&row, "year", wic_path, line)? == "2025"
            && col(&row, "age_group", wic_path, line)? == "25up"
            && col(&row, "sex", wic_path, line)? == "total"
        {
            let iso = col(&row, "iso3", wic_path, line)?.to_uppercase();
            let lvl = col(&row, "level_label", wic_path, line)?.to_string();
            wic.entry(iso)
                .or_default()
                .insert(lvl, num(&row, "share", wic_path, line)?);
        }
    }
    let edu_values = tax.domain("education_level").unwrap().to_vec();
    let mut rows = Vec::new();
    let mut capped = Vec::new();
    for (iso, _, name) in &countries {
        let m = wic
            .get(iso)
            .ok_or_else(|| anyhow!("{}: no 2025 25up total rows for {iso}", wic_path.display()))?;
        let mut v: Vec<f64> = wic_levels
            .iter()
            .map(|l| {
                m.get(*l)
                    .copied()
                    .ok_or_else(|| anyhow!("{}: {iso} has no level {l}", wic_path.display()))
            })
            .collect::<Result<_>>()?;
        v.iter_mut()
            .filter(|x| **x == 0.0)
            .for_each(|x| *x = ROUNDED_ZERO);
        normalise(&mut v)?;
        let post = v[5];
        let b = *ba
            .get(iso)
            .ok_or_else(|| anyhow!("{}: no value for {iso}", ba_path.display()))?;
        let bplus = if b > post {
            capped.push(format!("{iso} ({:.3} > {:.3})", b, post));
            post
        } else {
            b
        };
        let mut shares: BTreeMap<&str, f64> = BTreeMap::new();
        shares.insert("none", v[0] + v[1]);
        shares.insert("primary", v[2]);
        shares.insert("lower secondary", v[3]);
        shares.insert("upper secondary", v[4]);
        shares.insert("vocational", (post - bplus).max(0.0));
        for (lvl, f) in BACHELOR_SPLIT {
            shares.insert(lvl, bplus * f);
        }
        for lvl in &edu_values {
            let s = *shares
                .get(lvl.as_str())
                .ok_or_else(|| anyhow!("education level {lvl:?} has no mapping"))?;
            rows.push((vec![name.clone(), lvl.clone()], w(iso) * s));
        }
    }
    tables.push(Table {
        entry: entry(
            "country_education",
            &["current_country", "education_level"],
            Status::Derived,
            &["wic_edstats", "wdi_bachelor", "privacytrace_table5"],
            "CC BY 4.0",
            format!(
                "Wittgenstein Centre 2025 projection, population 25+, both sexes, six attainment levels (two decimals; zeros read as {ROUNDED_ZERO}, the midpoint of the rounding interval; renormalised). Mapping: none = no education + incomplete primary; primary; lower secondary; upper secondary; post-secondary split into at-least-bachelor (WDI SE.TER.CUAT.BA.ZS, latest year, capped at the post-secondary share{}) and the remainder, taken as vocational (short-cycle tertiary and post-secondary non-tertiary). At-least-bachelor is split into bachelor/master/doctorate by fixed assumed fractions. The 25+ distribution is applied to the whole 18-80 frame.",
                if capped.is_empty() { String::new() } else { format!("; capped for {}", capped.join(", ")) }
            ),
            vec![
                format!(
                    "Split of the at-least-bachelor population: bachelor {}, master {}, doctorate {} (no comparable source for all 26 countries).",
                    BACHELOR_SPLIT[0].1, BACHELOR_SPLIT[1].1, BACHELOR_SPLIT[2].1
                ),
                "The education distribution of adults 25+ stands for the 18-80 frame (younger adults still in education are not modelled separately).".into(),
                "Vocational is the post-secondary attainment that is not a bachelor's degree or higher; vocational upper-secondary tracks count as upper secondary.".into(),
            ],
        ),
        rows,
    });

    // 4. religion
    let pew_path = src.path("pew2015")?;
    let pew_map = [
        ("Christians_pct", "Christian"),
        ("Muslims_pct", "Muslim"),
        ("Unaffiliated_pct", "Unaffiliated"),
        ("Hindus_pct", "Hindu"),
        ("Buddhists_pct", "Buddhist"),
        ("Folk Religions_pct", "Folk"),
        ("Jews_pct", "Jewish"),
    ];
    let rel_values = tax.domain("religious_belief").unwrap().to_vec();
    let mut pew: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
    for (line, row) in read_rows(pew_path)? {
        if col(&row, "Year", pew_path, line)? != "2020" {
            continue;
        }
        let iso = col(&row, "iso3", pew_path, line)?.to_uppercase();
        let mut m = BTreeMap::new();
        for (c, v) in pew_map {
            m.insert(v.to_string(), num_or_zero(&row, c, pew_path, line)?);
        }
        pew.insert(iso, m);
    }
    let mut rows = Vec::new();
    for (iso, _, name) in &countries {
        let m = pew
            .get(iso)
            .ok_or_else(|| anyhow!("{}: no 2020 row for {iso}", pew_path.display()))?;
        let mut v: Vec<f64> = rel_values
            .iter()
            .map(|r| {
                m.get(r)
                    .copied()
                    .ok_or_else(|| anyhow!("religion {r:?} has no Pew mapping"))
            })
            .collect::<Result<_>>()?;
        normalise(&mut v)?;
        for (r, s) in rel_values.iter().zip(v) {
            rows.push((vec![name.clone(), r.clone()], w(iso) * s));
        }
    }
    tables.push(Table {
        entry: entry(
            "country_religion",
            &["current_country", "religious_belief"],
            Status::Derived,
            &["pew2015", "privacytrace_table5"],
            "Pew Research Center terms of use (attribution required; not an open licence): Pew Research Center, The Future of World Religions: Population Growth Projections, 2010-2050 (2015)",
            "Pew 2020 projected percentages. Christians, Muslims, Unaffiliated, Hindus, Buddhists, Folk Religions and Jews map to the seven categories; 'Other Religions' has no category in the taxonomy and is dropped, the rest renormalised; groups Pew reports as below 10,000 people count as 0.".into(),
            vec!["Adherents of 'other religions' (e.g. Sikhs, Jains, Baha'is, Shinto) are redistributed proportionally over the seven categories.".into()],
        ),
        rows,
    });

    // 5. city catalog and city-size margin
    let geo_path = src.path("geonames")?;
    let size_bands = tax.bands("current_city_size").to_vec();
    let mut best: BTreeMap<(String, String), (u64, u64, String)> = BTreeMap::new(); // (country, city) -> (pop, id, admin1)
    let mut seen_rows = 0usize;
    for (line, row) in read_rows(geo_path)? {
        let iso2 = col(&row, "country_iso2", geo_path, line)?;
        let Some(country) = tax.countries.iter().find(|c| c.iso2 == iso2) else {
            bail!(
                "{}:{line}: unknown country code {iso2:?}",
                geo_path.display()
            );
        };
        let pop = num(&row, "population", geo_path, line)? as u64;
        if pop < size_bands[0].min {
            continue;
        }
        seen_rows += 1;
        let id = num(&row, "geonameid", geo_path, line)? as u64;
        let raw = col(&row, "name", geo_path, line)?;
        let city = raw.split(',').next().unwrap_or(raw).trim().to_string();
        if city.is_empty() {
            bail!("{}:{line}: empty city name", geo_path.display());
        }
        let admin1 = col(&row, "admin1_code", geo_path, line)?.to_string();
        let key = (country.name.clone(), city);
        let better = match best.get(&key) {
            None => true,
            Some((p, i, _)) => pop > *p || (pop == *p && id < *i),
        };
        if better {
            best.insert(key, (pop, id, admin1));
        }
    }
    let dropped = seen_rows - best.len();
    let mut catalog: Vec<(String, String, String, String, u64, u64, String)> = Vec::new();
    for ((cname, city), (pop, id, admin1)) in &best {
        let iso3 = tax.country_by_name(cname).unwrap().iso3.clone();
        let class = tax.band_of("current_city_size", *pop).unwrap().to_string();
        catalog.push((
            iso3,
            cname.clone(),
            city.clone(),
            admin1.clone(),
            *pop,
            *id,
            class,
        ));
    }
    // Country order of the taxonomy, then by population descending, then id.
    let order: BTreeMap<String, usize> = countries
        .iter()
        .enumerate()
        .map(|(i, c)| (c.0.clone(), i))
        .collect();
    catalog.sort_by(|a, b| {
        order[&a.0]
            .cmp(&order[&b.0])
            .then(b.4.cmp(&a.4))
            .then(a.5.cmp(&b.5))
    });
    let mut rows = Vec::new();
    for (iso, _, name) in &countries {
        let mut by_band: Vec<f64> = vec![0.0; size_bands.len()];
        for c in catalog.iter().filter(|c| &c.0 == iso) {
            let k = size_bands.iter().position(|b| b.label == c.6).unwrap();
            by_band[k] += c.4 as f64;
        }
        normalise(&mut by_band).with_context(|| format!("no catalog city for {iso}"))?;
        for (b, s) in size_bands.iter().zip(by_band) {
            rows.push((vec![name.clone(), b.label.clone()], w(iso) * s));
        }
    }
    tables.push(Table {
        entry: entry(
            "country_city_size",
            &["current_country", "current_city_size"],
            Status::Derived,
            &["geonames", "privacytrace_table5"],
            "CC BY 4.0 (GeoNames, geonames.org)",
            format!("Share of the population of catalog cities (GeoNames places with at least {} inhabitants, the project's city catalog) living in each size band, per country; cities are then drawn within a band in proportion to population.", size_bands[0].min),
            vec![
                "Every profile lives in a catalog city: residents of smaller places and rural areas are represented by the residents of cities, in proportion to city population.".into(),
                "GeoNames populations are of mixed vintage and refer to the place, not the urban agglomeration.".into(),
            ],
        ),
        rows,
    });

    // 6. employment and occupation group by country and sex
    let occ_path = src.path("ilo_occupation")?;
    let ratio_path = src.path("ilo_emp_ratio")?;
    let mut ratio: BTreeMap<(String, String), f64> = BTreeMap::new();
    for (line, row) in read_rows(ratio_path)? {
        let iso = col(&row, "iso3", ratio_path, line)?.to_uppercase();
        let sex = col(&row, "sex", ratio_path, line)?.to_string();
        ratio.insert(
            (iso, sex),
            num(&row, "ratio_percent", ratio_path, line)? / 100.0,
        );
    }
    let mut occ: BTreeMap<(String, String, String), f64> = BTreeMap::new();
    for (line, row) in read_rows(occ_path)? {
        let iso = col(&row, "iso3", occ_path, line)?.to_uppercase();
        let sex = col(&row, "sex", occ_path, line)?.to_string();
        let code = col(&row, "occupation_code", occ_path, line)?.to_string();
        occ.insert(
            (iso, sex, code),
            num(&row, "employed_thousands", occ_path, line)?,
        );
    }
    let mut rows = Vec::new();
    for (iso, _, name) in &countries {
        for s in &sexes {
            let r = *ratio
                .get(&(iso.clone(), s.clone()))
                .ok_or_else(|| anyhow!("{}: no 15+ ratio for {iso} {s}", ratio_path.display()))?;
            let mut emp: Vec<f64> = tax
                .occupations
                .groups
                .iter()
                .map(|g| {
                    let code = g.ilo_code.clone().unwrap_or_default();
                    occ.get(&(iso.clone(), s.clone(), code.clone()))
                        .copied()
                        .ok_or_else(|| anyhow!("{}: no {code} for {iso} {s}", occ_path.display()))
                })
                .collect::<Result<_>>()?;
            normalise(&mut emp)?;
            let base = w(iso) * p_sex(iso, s);
            rows.push((
                vec![
                    name.clone(),
                    s.clone(),
                    tax.occupations.not_employed.group.clone(),
                ],
                base * (1.0 - r),
            ));
            for (g, e) in tax.occupations.groups.iter().zip(emp) {
                rows.push((vec![name.clone(), s.clone(), g.group.clone()], base * r * e));
            }
        }
    }
    tables.push(Table {
        entry: entry(
            "country_sex_occupation",
            &["current_country", "sex", "occupation_group"],
            Status::Derived,
            &["ilo_emp_ratio", "ilo_occupation", "wpp2024", "privacytrace_table5"],
            "CC BY 4.0 (ILO via Open Numbers)",
            "Not employed = 1 - employment-to-population ratio (15+, 2025, by sex); employed split over ISCO-08 major groups by the 2025 employment shares by sex (group 96 aggregates skilled agricultural workers and elementary occupations; armed forces are not in the series). P(sex | country) from WPP 2024 (18-80).".into(),
            vec!["The 15+ employment-to-population ratio and occupation mix stand for the 18-80 frame.".into()],
        ),
        rows,
    });

    // 7. income
    let gini_path = src.path("wdi_gini")?;
    let mut gini: BTreeMap<String, f64> = BTreeMap::new();
    for (line, row) in read_rows(gini_path)? {
        gini.insert(
            col(&row, "iso3", gini_path, line)?.to_uppercase(),
            num(&row, "gini", gini_path, line)? / 100.0,
        );
    }
    let income = tax
        .fields
        .categorical
        .get("income_level")
        .ok_or_else(|| anyhow!("taxonomy has no income_level"))?;
    if income.median_ratio_bounds.len() != income.values.len() {
        bail!("taxonomy income_level: median_ratio_bounds must have one entry per value");
    }
    let std_normal = Normal::new(0.0, 1.0).unwrap();
    let mut rows = Vec::new();
    for (iso, _, name) in &countries {
        let g = *gini
            .get(iso)
            .ok_or_else(|| anyhow!("{}: no Gini for {iso}", gini_path.display()))?;
        let sigma = std::f64::consts::SQRT_2 * std_normal.inverse_cdf((g + 1.0) / 2.0);
        let cdf = |k: Option<f64>| -> f64 {
            match k {
                None => 1.0,
                Some(k) if k <= 0.0 => 0.0,
                Some(k) => std_normal.cdf(k.ln() / sigma),
            }
        };
        for (v, (lo, hi)) in income.values.iter().zip(&income.median_ratio_bounds) {
            rows.push((
                vec![name.clone(), v.clone()],
                w(iso) * (cdf(*hi) - cdf(Some(*lo))),
            ));
        }
    }
    tables.push(Table {
        entry: entry(
            "country_income",
            &["current_country", "income_level"],
            Status::Derived,
            &["wdi_gini", "privacytrace_table5"],
            "CC BY 4.0",
            "Income bands relative to the national median (taxonomy median_ratio_bounds). Income is taken as lognormal with the country's latest World Bank Gini index G: sigma = sqrt(2) * Phi^-1((1 + G) / 2); a band [a, b) times the median has share Phi(ln b / sigma) - Phi(ln a / sigma).".into(),
            vec![
                "Income (or consumption, depending on the survey behind the Gini) is lognormal within each country.".into(),
                "Gini survey years range from 2013 to 2022 and welfare concepts differ between countries.".into(),
            ],
        ),
        rows,
    });

    // 8-12. assumption tables
    let asm = margins_dir.join("assumptions");
    let eth_path = asm.join("ethnicity_by_country.csv");
    let eth_values = tax.domain("ethnicity").unwrap().to_vec();
    let eth = read_conditional(&eth_path, &["iso3"], "ethnicity", &eth_values)?;
    let mut rows = Vec::new();
    for (iso, _, name) in &countries {
        let d = eth
            .get(&vec![iso.clone()])
            .ok_or_else(|| anyhow!("{}: no rows for {iso}", eth_path.display()))?;
        for (e, s) in eth_values.iter().zip(d) {
            rows.push((vec![name.clone(), e.clone()], w(iso) * s));
        }
    }
    tables.push(Table {
        entry: entry(
            "country_ethnicity",
            &["current_country", "ethnicity"],
            Status::Assumption,
            &["privacytrace_table5"],
            "project assumption (CC BY 4.0 as part of this project)",
            "P(ethnicity | country) from population-margins/assumptions/ethnicity_by_country.csv (see assumptions/README.md), times the country margin.".into(),
            vec!["No census extract is available here: national compositions are approximate and mapped onto ten broad groups; see assumptions/README.md.".into()],
        ),
        rows,
    });

    // Pooled P(age_group, sex) over the frame for the margins without country.
    let mut pooled: BTreeMap<(String, String), f64> = BTreeMap::new();
    for (iso, _, _) in &countries {
        for (g, s, p) in &age_sex[iso] {
            *pooled.entry((g.clone(), s.clone())).or_insert(0.0) += w(iso) * p;
        }
    }
    let rel_path = asm.join("relationship_by_age_sex.csv");
    let rel_values = tax.domain("relationship_status").unwrap().to_vec();
    let rel = read_conditional(
        &rel_path,
        &["age_group", "sex"],
        "relationship_status",
        &rel_values,
    )?;
    let mut rows = Vec::new();
    for b in &age_bands {
        for s in &sexes {
            let d = rel
                .get(&vec![b.label.clone(), s.clone()])
                .ok_or_else(|| anyhow!("{}: no rows for {} {s}", rel_path.display(), b.label))?;
            for (r, p) in rel_values.iter().zip(d) {
                rows.push((
                    vec![b.label.clone(), s.clone(), r.clone()],
                    pooled[&(b.label.clone(), s.clone())] * p,
                ));
            }
        }
    }
    tables.push(Table {
        entry: entry(
            "age_sex_relationship",
            &["age_group", "sex", "relationship_status"],
            Status::Assumption,
            &["wpp2024", "privacytrace_table5"],
            "project assumption; age and sex weights CC BY 3.0 IGO",
            "P(relationship | age group, sex) from population-margins/assumptions/relationship_by_age_sex.csv, times P(age group, sex) pooled over the frame from the country_age_sex margin.".into(),
            vec!["One global relationship pattern by age and sex; no marital-status extract is available here.".into()],
        ),
        rows,
    });

    let mental_path = asm.join("mental_condition_by_age_group.csv");
    let mental_values = tax.domain("mental_condition").unwrap().to_vec();
    let mental = read_conditional(
        &mental_path,
        &["age_group"],
        "mental_condition",
        &mental_values,
    )?;
    let mut rows = Vec::new();
    for b in &age_bands {
        let pg: f64 = sexes
            .iter()
            .map(|s| pooled[&(b.label.clone(), s.clone())])
            .sum();
        let d = mental
            .get(&vec![b.label.clone()])
            .ok_or_else(|| anyhow!("{}: no rows for {}", mental_path.display(), b.label))?;
        for (m, p) in mental_values.iter().zip(d) {
            rows.push((vec![b.label.clone(), m.clone()], pg * p));
        }
    }
    tables.push(Table {
        entry: entry(
            "age_mental",
            &["age_group", "mental_condition"],
            Status::Assumption,
            &["wpp2024", "privacytrace_table5"],
            "project assumption; age weights CC BY 3.0 IGO",
            "P(mental condition | age group) from population-margins/assumptions/mental_condition_by_age_group.csv (single label: the main condition, or None), times P(age group) pooled over the frame.".into(),
            vec!["No health-burden extract is available here; prevalences are approximate global figures; see assumptions/README.md.".into()],
        ),
        rows,
    });

    // Physical condition: hypertension and obesity from NCD-RisC by country and sex, the rest assumed.
    let bp_path = src.path("ncdrisc_bp")?;
    let bmi_path = src.path("ncdrisc_bmi")?;
    let mut bp: BTreeMap<(String, String), f64> = BTreeMap::new();
    for (line, row) in read_rows(bp_path)? {
        let iso = col(&row, "iso3", bp_path, line)?.to_uppercase();
        bp.insert(
            (iso.clone(), "male".into()),
            num(
                &row,
                "Crude raised blood pressure prevalence (male)",
                bp_path,
                line,
            )?,
        );
        bp.insert(
            (iso, "female".into()),
            num(
                &row,
                "Crude raised blood pressure prevalence (female)",
                bp_path,
                line,
            )?,
        );
    }
    let mut obese: BTreeMap<(String, String), f64> = BTreeMap::new();
    for (line, row) in read_rows(bmi_path)? {
        let iso = col(&row, "iso3", bmi_path, line)?.to_uppercase();
        let sex = col(&row, "sex", bmi_path, line)?.to_string();
        obese.insert(
            (iso, sex),
            num(&row, "Obese (NCDRisC (2017))", bmi_path, line)? / 100.0,
        );
    }
    let prev_path = asm.join("physical_condition_prevalence.csv");
    let phys_values = tax.domain("physical_condition").unwrap().to_vec();
    let mut assumed: BTreeMap<String, f64> = BTreeMap::new();
    for (line, row) in read_rows(&prev_path)? {
        let c = col(&row, "physical_condition", &prev_path, line)?.to_string();
        if !phys_values.contains(&c) || ["None", "Hypertension", "Obesity"].contains(&c.as_str()) {
            bail!(
                "{}:{line}: unexpected physical_condition {c:?}",
                prev_path.display()
            );
        }
        let p = num(&row, "prevalence", &prev_path, line)?;
        if !(0.0..1.0).contains(&p) {
            bail!(
                "{}:{line}: prevalence {p} outside [0, 1)",
                prev_path.display()
            );
        }
        assumed.insert(c, p);
    }
    let mut rows = Vec::new();
    for (iso, _, name) in &countries {
        for s in &sexes {
            let key = (iso.clone(), s.clone());
            let h = *bp
                .get(&key)
                .ok_or_else(|| anyhow!("{}: no value for {iso} {s}", bp_path.display()))?;
            let o = *obese
                .get(&key)
                .ok_or_else(|| anyhow!("{}: no value for {iso} {s}", bmi_path.display()))?;
            let prev: Vec<f64> = phys_values
                .iter()
                .map(|v| match v.as_str() {
                    "None" => Ok(0.0),
                    "Hypertension" => Ok(h),
                    "Obesity" => Ok(o),
                    other => assumed.get(other).copied().ok_or_else(|| {
                        anyhow!("{}: no prevalence for {other:?}", prev_path.display())
                    }),
                })
                .collect::<Result<_>>()?;
            let none: f64 = prev.iter().map(|p| 1.0 - p).product();
            let sum: f64 = prev.iter().sum();
            let base = w(iso) * p_sex(iso, s);
            for (v, p) in phys_values.iter().zip(&prev) {
                let share = if v == "None" {
                    none
                } else {
                    (1.0 - none) * p / sum
                };
                rows.push((vec![name.clone(), s.clone(), v.clone()], base * share));
            }
        }
    }
    tables.push(Table {
        entry: entry(
            "country_sex_physical",
            &["current_country", "sex", "physical_condition"],
            Status::Derived,
            &["ncdrisc_bp", "ncdrisc_bmi", "wpp2024", "privacytrace_table5"],
            "NCD-RisC data reused with citation (NCD Risk Factor Collaboration, Lancet 2017); assumed prevalences are the project's",
            "Single label per person. Prevalences p_i: hypertension = NCD-RisC crude raised blood pressure prevalence (2015) by country and sex; obesity = NCD-RisC obesity prevalence (2014) by country and sex; other conditions = assumed global prevalences (assumptions/physical_condition_prevalence.csv). None = prod(1 - p_i); the remaining mass is split in proportion to p_i. P(sex | country) from WPP 2024.".into(),
            vec![
                "Prevalences of conditions other than hypertension and obesity are assumed global figures, equal in every country and for both sexes.".into(),
                "Conditions are independent when computing the share with none.".into(),
            ],
        ),
        rows,
    });

    let mig_path = asm.join("migration_by_country.csv");
    let mut mig: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for (line, row) in read_rows(&mig_path)? {
        let iso = col(&row, "iso3", &mig_path, line)?.to_uppercase();
        if tax.country_by_iso3(&iso).is_none() {
            bail!("{}:{line}: unknown country {iso:?}", mig_path.display());
        }
        let fb = num(&row, "foreign_born_share", &mig_path, line)?;
        let fc = num(
            &row,
            "foreign_citizen_share_of_foreign_born",
            &mig_path,
            line,
        )?;
        if !(0.0..=1.0).contains(&fb) || !(0.0..=1.0).contains(&fc) {
            bail!("{}:{line}: shares must lie in [0, 1]", mig_path.display());
        }
        mig.insert(iso, (fb, fc));
    }
    let mut birth_rows = Vec::new();
    let mut cit_rows = Vec::new();
    for (iso, _, name) in &countries {
        let (fb, fc) = *mig
            .get(iso)
            .ok_or_else(|| anyhow!("{}: no row for {iso}", mig_path.display()))?;
        let others: f64 = countries
            .iter()
            .filter(|c| &c.0 != iso)
            .map(|c| w(&c.0))
            .sum();
        for (o, _, oname) in &countries {
            let (b, c) = if o == iso {
                (1.0 - fb, 1.0 - fb * fc)
            } else {
                let origin = w(o) / others;
                (fb * origin, fb * fc * origin)
            };
            birth_rows.push((vec![name.clone(), oname.clone()], w(iso) * b));
            cit_rows.push((vec![name.clone(), oname.clone()], w(iso) * c));
        }
    }
    let mig_note = "Foreign-born shares are approximate values of the international-migrant share of each country's population (UN DESA International Migrant Stock 2020), not verified against an extract here; see assumptions/README.md.".to_string();
    tables.push(Table {
        entry: entry(
            "country_birth_country",
            &["current_country", "birth_country"],
            Status::Assumption,
            &["privacytrace_table5"],
            "project assumption",
            "Born in the country of residence with probability 1 - f (f = assumed foreign-born share); the foreign-born come from the other 25 frame countries in proportion to their country weights.".into(),
            vec![mig_note.clone(), "Origins outside the 26 frame countries are not modelled; origin mix proportional to population is a simplification of real migration corridors.".into()],
        ),
        rows: birth_rows,
    });
    tables.push(Table {
        entry: entry(
            "country_citizenship",
            &["current_country", "citizenship"],
            Status::Assumption,
            &["privacytrace_table5"],
            "project assumption",
            "Citizens of the country of residence, except a share c (assumed) of the foreign-born, who hold the citizenship of their birth country: P(citizenship = residence) = 1 - f c, P(citizenship = o) = f c origin(o).".into(),
            vec![mig_note, "Dual citizenship is not modelled.".into()],
        ),
        rows: cit_rows,
    });

    // Write everything, then check that the result loads.
    let mut margins = Vec::new();
    let mut summary = Vec::new();
    for t in &tables {
        let total: f64 = t.rows.iter().map(|r| r.1).sum();
        if (total - 1.0).abs() > 1e-9 {
            bail!("internal: margin {} sums to {total}", t.entry.name);
        }
        write_atomic(&margins_dir.join(&t.entry.file), &t.csv())?;
        summary.push((t.entry.name.clone(), t.rows.len(), t.entry.status.clone()));
        margins.push(t.entry.clone());
    }
    let mut w_cat = csv::Writer::from_writer(Vec::new());
    w_cat.write_record([
        "geonameid",
        "city",
        "iso3",
        "country",
        "admin1",
        "population",
        "size_class",
    ])?;
    for (iso3, cname, city, admin1, pop, id, class) in &catalog {
        w_cat.write_record([
            id.to_string(),
            city.clone(),
            iso3.clone(),
            cname.clone(),
            admin1.clone(),
            pop.to_string(),
            class.clone(),
        ])?;
    }
    write_atomic(&margins_dir.join("cities.csv"), &w_cat.into_inner()?)?;
    let mut w_age = csv::Writer::from_writer(Vec::new());
    w_age.write_record(["age_group", "age", "share"])?;
    for (g, a, p) in &age_rows {
        w_age.write_record([g.clone(), a.to_string(), format!("{p}")])?;
    }
    write_atomic(&margins_dir.join("age_in_group.csv"), &w_age.into_inner()?)?;

    let manifest = MarginsManifest {
        generated_by: "privforge margins build --sources <dir>; do not edit by hand".into(),
        frame: format!("Adults aged {amin}-{amax} living in the {} countries of the PrivacyTrace frame, 2025", countries.len()),
        reference_year: 2025,
        catalog: TableEntry {
            name: "cities".into(),
            file: "cities.csv".into(),
            status: Status::Derived,
            licence: "CC BY 4.0 (attribution: GeoNames, geonames.org)".into(),
            derivation: format!(
                "GeoNames places with population >= {} in the frame countries; names cut at the first comma; where a country has two places of the same name the more populous is kept ({dropped} dropped); size class from the taxonomy bands.",
                size_bands[0].min
            ),
            sources: src.refs(&["geonames"]),
        },
        age_in_group: TableEntry {
            name: "age_in_group".into(),
            file: "age_in_group.csv".into(),
            status: Status::Derived,
            licence: "CC BY 3.0 IGO".into(),
            derivation: "Share of each single year of age within its age group, pooled over the frame with the country weights (WPP 2024, ages uniform within five-year groups). Used by the candidate proposal only, not fitted.".into(),
            sources: src.refs(&["wpp2024", "privacytrace_table5"]),
        },
        margins,
    };
    let toml_text = toml::to_string_pretty(&manifest)?;
    let header = "# Population margins of the PrivForge sampling frame.\n# Generated by `privforge margins build`; edit the sources or assumptions, then rebuild.\n\n";
    write_atomic(
        &margins_dir.join(crate::margins::MANIFEST),
        format!("{header}{toml_text}").as_bytes(),
    )?;

    crate::margins::MarginSet::load(margins_dir, &tax)
        .context("the margins just built do not load")?;
    Ok(BuildSummary {
        margins: summary,
        cities: catalog.len(),
        dropped_duplicate_cities: dropped,
        wpp_vs_table5_max_abs_diff: wpp_vs_t5,
    })
}

/// Reads a conditional distribution table `keys..., value, share` and returns, per key,
/// the shares in the order of `values`; each key's shares must sum to one.
fn read_conditional(
    path: &Path,
    keys: &[&str],
    value: &str,
    values: &[String],
) -> Result<BTreeMap<Vec<String>, Vec<f64>>> {
    let mut out: BTreeMap<Vec<String>, Vec<f64>> = BTreeMap::new();
    let mut seen: BTreeMap<Vec<String>, Vec<bool>> = BTreeMap::new();
    for (line, row) in read_rows(path)? {
        let k: Vec<String> = keys
            .iter()
            .map(|c| col(&row, c, path, line).map(|s| s.to_string()))
            .collect::<Result<_>>()?;
        let v = col(&row, value, path, line)?;
        let j = values.iter().position(|x| x == v).ok_or_else(|| {
            anyhow!(
                "{}:{line}: unknown value {v:?} for field {value:?}",
                path.display()
            )
        })?;
        let s = num(&row, "share", path, line)?;
        if s < 0.0 {
            bail!("{}:{line}: share {s} is negative", path.display());
        }
        let e = out
            .entry(k.clone())
            .or_insert_with(|| vec![0.0; values.len()]);
        let f = seen.entry(k).or_insert_with(|| vec![false; values.len()]);
        if f[j] {
            bail!("{}:{line}: row listed twice", path.display());
        }
        f[j] = true;
        e[j] = s;
    }
    for (k, v) in out.iter_mut() {
        let t: f64 = v.iter().sum();
        if (t - 1.0).abs() > crate::margins::SUM_TOLERANCE {
            bail!(
                "{}: shares for {} sum to {t}, expected 1",
                path.display(),
                k.join(" | ")
            );
        }
        v.iter_mut().for_each(|x| *x /= t);
    }
    Ok(out)
}
