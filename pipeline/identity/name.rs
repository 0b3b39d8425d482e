//! Names: a documented plausibility rule, and generation from the per-country name lists in
//! `taxonomy/names/`.
//!
//! Rule: 2 to 120 characters; letters, spaces, hyphens, apostrophes and periods only; at
//! least two letters; no leading, trailing or doubled spaces; and every letter written in one
//! of the scripts the taxonomy lists for the person's citizenship or residence country
//! (`name_scripts` in `countries.json`; Latin, for romanised names, is listed everywhere).

use super::govid::Sex;
use crate::seeding::StageRng;
use crate::taxonomy::{load_checked_json, Taxonomy};
use anyhow::{anyhow, Context, Result};
use rand::Rng;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use unicode_script::{Script, UnicodeScript};

pub const MAX_CHARS: usize = 120;

pub fn check(name: &str, scripts: &[&str]) -> Result<(), String> {
    let n = name.chars().count();
    if !(2..=MAX_CHARS).contains(&n) {
        return Err(format!("length {n} outside 2..={MAX_CHARS}"));
    }
    if name.starts_with(' ') || name.ends_with(' ') || name.contains("  ") {
        return Err("leading, trailing or doubled space".into());
    }
    let mut letters = 0;
    for c in name.chars() {
        if c.is_alphabetic() {
            letters += 1;
            let sc = c.script();
            if matches!(sc, Script::Common | Script::Inherited) {
                continue;
            }
            if !scripts.iter().any(|s| *s == sc.full_name()) {
                return Err(format!(
                    "letter {c:?} is in the {} script, expected {}",
                    sc.full_name(),
                    scripts.join(" or ")
                ));
            }
        } else if !(c == ' ' || c == '-' || c == '\'' || c == '\u{2019}' || c == '.' || is_mark(c))
        {
            return Err(format!("character {c:?} is not allowed in a name"));
        }
    }
    if letters < 2 {
        return Err("fewer than two letters".into());
    }
    Ok(())
}

/// Combining marks (Vietnamese tones written as separate marks, Indic vowel signs).
fn is_mark(c: char) -> bool {
    matches!(c.script(), Script::Inherited)
        || ('\u{0300}'..='\u{036F}').contains(&c)
        || ('\u{0900}'..='\u{0DFF}').contains(&c)
}

#[derive(Debug, Clone, Deserialize)]
pub struct Given {
    pub female: Vec<String>,
    pub male: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CountryNames {
    pub country: String,
    pub provenance: String,
    pub given: Given,
    pub surnames: Vec<String>,
    pub surname_first: bool,
    #[serde(default)]
    pub female_only_surnames: Vec<String>,
    #[serde(default)]
    pub feminine_surname_endings: Vec<(String, String)>,
}

impl CountryNames {
    /// A given name and surname for a person of `sex`, and the full name in the country's
    /// usual order.
    pub fn pick(&self, sex: Sex, rng: &mut StageRng) -> (String, String, String) {
        let givens = match sex {
            Sex::Female => &self.given.female,
            Sex::Male => &self.given.male,
        };
        let given = givens[rng.random_range(0..givens.len())].clone();
        let pool: Vec<&String> = self
            .surnames
            .iter()
            .filter(|s| sex == Sex::Female || !self.female_only_surnames.contains(s))
            .collect();
        let mut surname = pool[rng.random_range(0..pool.len())].clone();
        if sex == Sex::Female {
            for (m, f) in &self.feminine_surname_endings {
                if let Some(stem) = surname.strip_suffix(m.as_str()) {
                    surname = format!("{stem}{f}");
                    break;
                }
            }
        }
        let full = if self.surname_first {
            format!("{surname} {given}")
        } else {
            format!("{given} {surname}")
        };
        (given, surname, full)
    }
}

/// Name lists of every frame country, each checked against `taxonomy/schemas/names.schema.json`.
#[derive(Debug, Clone)]
pub struct NameLists {
    pub by_iso3: BTreeMap<String, CountryNames>,
}

impl NameLists {
    pub fn load(tax: &Taxonomy) -> Result<Self> {
        let schema = tax.dir.join("schemas/names.schema.json");
        let mut by_iso3 = BTreeMap::new();
        for c in &tax.countries {
            let file = tax
                .dir
                .join("names")
                .join(format!("{}.json", c.iso3.to_lowercase()));
            let v = load_checked_json(&file, &schema)?;
            let n: CountryNames = serde_json::from_value(v)
                .with_context(|| format!("{}: unexpected structure", file.display()))?;
            if n.country != c.iso3 {
                return Err(anyhow!(
                    "{}: country {:?} does not match the file name",
                    file.display(),
                    n.country
                ));
            }
            let scripts: Vec<&str> = c.name_scripts.iter().map(|s| s.as_str()).collect();
            for name in n
                .given
                .female
                .iter()
                .chain(&n.given.male)
                .chain(&n.surnames)
            {
                check_part(name, &scripts)
                    .map_err(|e| anyhow!("{}: name {name:?}: {e}", file.display()))?;
            }
            by_iso3.insert(c.iso3.clone(), n);
        }
        Ok(Self { by_iso3 })
    }

    pub fn files(tax: &Taxonomy) -> Vec<std::path::PathBuf> {
        let mut v: Vec<_> = tax
            .countries
            .iter()
            .map(|c| {
                tax.dir
                    .join("names")
                    .join(format!("{}.json", c.iso3.to_lowercase()))
            })
            .collect();
        v.push(tax.dir.join("schemas/names.schema.json"));
        v
    }
}

/// A single part of a name follows the same rule as a whole name, except its length.
fn check_part(part: &str, scripts: &[&str]) -> Result<(), String> {
    if part.chars().count() == 1 {
        return Err("a single character".into());
    }
    check(part, scripts)
}

/// Allowed scripts for a person: those of the citizenship country and the residence country.
pub fn scripts_for<'a>(tax: &'a Taxonomy, countries: &[&str]) -> Vec<&'a str> {
    let mut v: Vec<&str> = Vec::new();
    for name in countries {
        if let Some(c) = tax.country_by_name(name) {
            for s in &c.name_scripts {
                if !v.contains(&s.as_str()) {
                    v.push(s);
                }
            }
        }
    }
    v
}

pub fn load_default(dir: &Path) -> Result<(Taxonomy, NameLists)> {
    let tax = Taxonomy::load(dir)?;
    let names = NameLists::load(&tax)?;
    Ok((tax, names))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo_taxonomy() -> std::path::PathBuf {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("taxonomy")
    }

    #[test]
    fn the_rule_accepts_native_and_romanised_names_and_rejects_the_rest() {
        assert!(check("Ana Silva", &["Latin"]).is_ok());
        assert!(check("王芳", &["Latin", "Han"]).is_ok());
        assert!(check("O'Neil-Smith Jr.", &["Latin"]).is_ok());
        assert!(check("Nguyễn Thị Lan", &["Latin"]).is_ok());
        assert!(check("王芳", &["Latin"]).unwrap_err().contains("Han"));
        assert!(check("Ana2 Silva", &["Latin"]).is_err());
        assert!(check(" Ana", &["Latin"]).is_err());
        assert!(check("A", &["Latin"]).is_err());
        assert!(check(&"a".repeat(121), &["Latin"]).is_err());
    }

    #[test]
    fn every_list_loads_and_generated_names_pass_the_rule() {
        let (tax, lists) = load_default(&repo_taxonomy()).unwrap();
        assert_eq!(lists.by_iso3.len(), 26);
        let mut r = crate::seeding::rng(1, "test", "names");
        for c in &tax.countries {
            let scripts: Vec<&str> = c.name_scripts.iter().map(|s| s.as_str()).collect();
            for sex in [Sex::Female, Sex::Male] {
                for _ in 0..50 {
                    let (_, surname, full) = lists.by_iso3[&c.iso3].pick(sex, &mut r);
                    assert!(check(&full, &scripts).is_ok(), "{} {full}", c.iso3);
                    if sex == Sex::Male {
                        assert!(!lists.by_iso3[&c.iso3]
                            .female_only_surnames
                            .contains(&surname));
                    }
                }
            }
        }
        // Polish feminine surnames.
        let pol = &lists.by_iso3["POL"];
        let mut saw = false;
        for _ in 0..200 {
            let (_, s, _) = pol.pick(Sex::Female, &mut r);
            assert!(!s.ends_with("ski") && !s.ends_with("cki"), "{s}");
            saw |= s.ends_with("ska") || s.ends_with("cka");
        }
        assert!(saw);
    }
}
