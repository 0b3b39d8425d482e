//! Identity fields of a profile (name, email, phone number, government identifier, date of
//! birth): their deterministic validators, and generators that are valid by construction and
//! consistent with the profile (the fallback after repeated repair failures).

pub mod email;
pub mod govid;
pub mod name;
pub mod phone;

use crate::margins::CityCatalog;
use crate::profile::Person;
use crate::seeding::StageRng;
use crate::taxonomy::Taxonomy;
use govid::{Date, Sex, Subject};
use rand::Rng;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub name: String,
    pub email: String,
    pub phone_number: String,
    pub government_id: String,
}

/// A date of birth that gives `age` on `reference`, uniform over that one-year window.
pub fn birth_date(age: u8, reference: Date, rng: &mut StageRng) -> Date {
    // Born between reference - (age + 1) years + 1 day and reference - age years.
    let latest = shift_years(reference, -(age as i32));
    let earliest = next_day(shift_years(reference, -(age as i32) - 1));
    let span = days_between(earliest, latest);
    add_days(earliest, rng.random_range(0..=span))
}

fn shift_years(d: Date, years: i32) -> Date {
    let y = d.year + years;
    let day = d.day.min(Date::days_in_month(y, d.month));
    Date {
        year: y,
        month: d.month,
        day,
    }
}

fn next_day(d: Date) -> Date {
    add_days(d, 1)
}

fn add_days(mut d: Date, n: u32) -> Date {
    for _ in 0..n {
        if d.day < Date::days_in_month(d.year, d.month) {
            d.day += 1;
        } else if d.month < 12 {
            d.month += 1;
            d.day = 1;
        } else {
            d = Date {
                year: d.year + 1,
                month: 1,
                day: 1,
            };
        }
    }
    d
}

fn days_between(a: Date, b: Date) -> u32 {
    let mut n = 0;
    let mut d = a;
    while d < b {
        d = next_day(d);
        n += 1;
    }
    n
}

/// Everything a check needs about the person behind an identity.
pub struct Holder<'a> {
    pub person: &'a Person,
    pub date_of_birth: Date,
    pub reference: Date,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldProblem {
    pub field: String,
    pub problem: String,
}

fn iso_of<'a>(tax: &'a Taxonomy, country_name: &str) -> Option<&'a crate::taxonomy::Country> {
    tax.country_by_name(country_name)
}

/// Checks every identity field on its own (uniqueness across profiles is checked by the
/// caller). Returns the decoded identifier evidence when it parses.
pub fn validate(
    tax: &Taxonomy,
    h: &Holder,
    id: &Identity,
) -> (Vec<FieldProblem>, Option<govid::Evidence>) {
    let mut out = Vec::new();
    let mut push = |f: &str, p: String| {
        out.push(FieldProblem {
            field: f.into(),
            problem: p,
        })
    };
    let p = h.person;
    let scripts = name::scripts_for(tax, &[&p.citizenship, &p.current_country]);
    if let Err(e) = name::check(&id.name, &scripts) {
        push("name", e);
    }
    if let Err(e) = email::check(&id.email) {
        push("email", e);
    }
    let regions: Vec<&str> = [&p.citizenship, &p.current_country]
        .iter()
        .filter_map(|c| iso_of(tax, c).map(|c| c.iso2.as_str()))
        .collect();
    if let Err(e) = phone::check(&id.phone_number, &regions) {
        push("phone_number", e);
    }
    let mut evidence = None;
    match iso_of(tax, &p.citizenship).and_then(|c| govid::for_country(&c.iso3)) {
        None => push(
            "government_id",
            format!("no identifier scheme for citizenship {:?}", p.citizenship),
        ),
        Some(scheme) => {
            let norm = scheme.normalize(&id.government_id);
            if norm != id.government_id {
                push(
                    "government_id",
                    format!("not in compact form (expected {norm})"),
                );
            }
            match scheme.decode(&norm) {
                Err(e) => push("government_id", format!("{} {e}", scheme.document())),
                Ok(ev) => {
                    for problem in agreement(h, &ev, tax) {
                        push("government_id", problem);
                    }
                    evidence = Some(ev);
                }
            }
        }
    }
    (out, evidence)
}

/// Where the decoded evidence contradicts the profile.
pub fn agreement(h: &Holder, ev: &govid::Evidence, tax: &Taxonomy) -> Vec<String> {
    let p = h.person;
    let mut out = Vec::new();
    if let Some(d) = ev.birth_date {
        if d != h.date_of_birth {
            out.push(format!(
                "encodes birth date {d}, the profile's is {}",
                h.date_of_birth
            ));
        }
    }
    if let Some(y) = ev.birth_year {
        // The age on the reference date allows two birth years; the date of birth fixes one.
        let lo = h.reference.year - p.age as i32 - 1;
        let hi = h.reference.year - p.age as i32;
        if y < lo || y > hi {
            out.push(format!(
                "encodes birth year {y}, age {} on {} needs {lo} or {hi}",
                p.age, h.reference
            ));
        } else if y != h.date_of_birth.year {
            out.push(format!(
                "encodes birth year {y}, the profile's date of birth is {}",
                h.date_of_birth
            ));
        }
    }
    if let Some(m) = ev.birth_month {
        if m != h.date_of_birth.month {
            out.push(format!(
                "encodes birth month {m}, the profile's date of birth is {}",
                h.date_of_birth
            ));
        }
    }
    if let Some(s) = ev.sex {
        if Some(s) != Sex::parse(&p.sex) {
            out.push(format!("encodes sex {s:?}, the profile says {}", p.sex));
        }
    }
    if let Some(abroad) = ev.born_abroad {
        let born_in_issuer = p.birth_country == p.citizenship;
        if abroad == born_in_issuer {
            out.push(format!(
                "says born {}, the profile was born in {}",
                if abroad { "abroad" } else { "in the country" },
                p.birth_country
            ));
        }
    }
    let _ = tax;
    out
}

/// The subject of an identifier for a person.
pub fn subject<'a>(
    tax: &'a Taxonomy,
    cities: &'a CityCatalog,
    p: &'a Person,
    given: &'a str,
    surname: &'a str,
    dob: Date,
) -> Subject<'a> {
    let birth_iso3 = tax
        .country_by_name(&p.birth_country)
        .map(|c| c.iso3.as_str())
        .unwrap_or("");
    let city = cities.get(&p.birth_location);
    let issuer_is_birth_country = p.birth_country == p.citizenship;
    Subject {
        given_name: given,
        surname,
        sex: Sex::parse(&p.sex).unwrap_or(Sex::Female),
        birth_date: dob,
        birth_country_iso3: birth_iso3,
        birth_city: city.map(|c| c.name.as_str()).unwrap_or(""),
        birth_admin1: if issuer_is_birth_country {
            city.map(|c| c.admin1.as_str())
        } else {
            None
        },
    }
}

/// A complete identity valid by construction. `serial` makes the email unique.
pub fn fallback(
    tax: &Taxonomy,
    cities: &CityCatalog,
    names: &name::NameLists,
    p: &Person,
    dob: Date,
    serial: u32,
    rng: &mut StageRng,
) -> Option<Identity> {
    let cit = tax.country_by_name(&p.citizenship)?;
    let lists = names.by_iso3.get(&cit.iso3)?;
    let sex = Sex::parse(&p.sex)?;
    let (given, surname, full) = lists.pick(sex, rng);
    let domain = email::DOMAINS[rng.random_range(0..email::DOMAINS.len())];
    let email = email::from_name(&given, &surname, serial, domain);
    let home = tax.country_by_name(&p.current_country)?;
    let phone = phone::generate(&home.iso2, rng).or_else(|| phone::generate(&cit.iso2, rng))?;
    let scheme = govid::for_country(&cit.iso3)?;
    let government_id = scheme.generate(&subject(tax, cities, p, &given, &surname, dob), rng);
    Some(Identity {
        name: full,
        email,
        phone_number: phone,
        government_id,
    })
}

/// A profile with its date of birth and identity.
pub type Holding = (Person, Date, Identity);

/// JSON Schema hints for LLM answers, per field: the layout a valid value has. They keep
/// constrained decoders on plausible syntax; the validators above stay authoritative.
pub fn email_schema() -> serde_json::Value {
    serde_json::json!({"type": "string", "pattern": "^[a-z][a-z0-9._]{1,20}@example\\.(com|org|net)$"})
}

pub fn name_schema() -> serde_json::Value {
    serde_json::json!({"type": "string", "pattern": "^[A-Z][a-z]+( [A-Z][a-z]+){1,2}$"})
}

/// `+`, the country calling code, then a national number of a mobile length for the region.
pub fn phone_schema(iso2: &str) -> serde_json::Value {
    let meta = phonenumber::metadata::DATABASE.by_id(iso2);
    let (code, lens) = match meta {
        Some(m) => {
            let lens: Vec<u16> = m
                .descriptors()
                .mobile()
                .map(|d| d.possible_length().to_vec())
                .unwrap_or_default();
            (m.country_code(), lens)
        }
        None => (0, vec![]),
    };
    let (lo, hi) = (
        lens.iter().min().copied().unwrap_or(6),
        lens.iter().max().copied().unwrap_or(14),
    );
    serde_json::json!({"type": "string", "pattern": format!("^\\+{code}[0-9]{{{lo},{hi}}}$")})
}

pub fn government_id_schema(iso3: &str) -> serde_json::Value {
    match govid::syntax_pattern(iso3) {
        Some(p) => serde_json::json!({"type": "string", "pattern": p}),
        None => serde_json::json!({"type": "string", "minLength": 4, "maxLength": 24}),
    }
}

/// Random profiles from the reference inputs with fallback identities, for tests and the
/// validation benchmark.
pub fn sample_with_fallbacks(
    taxonomy: &std::path::Path,
    margins: &std::path::Path,
    n: usize,
    seed: u64,
    reference: Date,
) -> anyhow::Result<(Taxonomy, Vec<Holding>)> {
    let tax = Taxonomy::load(taxonomy)?;
    let ms = crate::margins::MarginSet::load(margins, &tax)?;
    let names = name::NameLists::load(&tax)?;
    let (pool, _) = crate::candidates::generate(seed, n, 0.5, 20, &tax, &ms, &|_| {})?;
    let mut out = Vec::with_capacity(n);
    for (i, p) in pool.into_iter().enumerate() {
        let mut r = crate::seeding::rng(seed, "identity-fallback", &p.candidate_id);
        let dob = birth_date(p.age, reference, &mut r);
        let id = fallback(&tax, &ms.cities, &names, &p, dob, i as u32, &mut r)
            .ok_or_else(|| anyhow::anyhow!("no fallback identity for {}", p.candidate_id))?;
        out.push((p, dob, id));
    }
    Ok((tax, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallback_identities_pass_every_validator_for_random_profiles() {
        let reference = Date::new(2026, 11, 29).unwrap();
        for seed in [1u64, 2, 3] {
            let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
            let (tax, rows) = sample_with_fallbacks(
                &root.join("taxonomy"),
                &root.join("population-margins"),
                1500,
                seed,
                reference,
            )
            .unwrap();
            let mut emails = std::collections::HashSet::new();
            let mut ids = std::collections::HashSet::new();
            for (p, dob, id) in &rows {
                let h = Holder {
                    person: p,
                    date_of_birth: *dob,
                    reference,
                };
                let (problems, _) = validate(&tax, &h, id);
                assert!(
                    problems.is_empty(),
                    "{} ({}, {}): {problems:?} {id:?}",
                    p.candidate_id,
                    p.citizenship,
                    p.sex
                );
                assert!(
                    emails.insert(email::unique_key(&id.email)),
                    "duplicate email {}",
                    id.email
                );
                ids.insert(id.government_id.clone());
            }
            assert!(
                ids.len() as f64 > rows.len() as f64 * 0.99,
                "too many identifier collisions"
            );
        }
    }

    #[test]
    fn birth_dates_give_the_stated_age_on_the_reference_date() {
        let reference = Date::new(2026, 11, 29).unwrap();
        let mut r = crate::seeding::rng(1, "test", "dob");
        for age in [18u8, 45, 80] {
            for _ in 0..500 {
                let d = birth_date(age, reference, &mut r);
                assert!(d.is_valid());
                assert_eq!(d.age_on(reference), age as i32, "{d}");
            }
        }
        let leap = Date::new(2024, 2, 29).unwrap();
        for _ in 0..200 {
            assert_eq!(birth_date(30, leap, &mut r).age_on(leap), 30);
        }
    }
}
