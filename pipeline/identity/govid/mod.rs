//! One government identifier per country: syntax, check digits, and the birth date, sex and
//! region some identifiers encode, decoded into evidence that must agree with the profile.
//! Every scheme can also generate identifiers that are valid by construction for a subject.

pub mod checks;
mod common;

use crate::seeding::StageRng;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Date {
    pub year: i32,
    pub month: u32,
    pub day: u32,
}

impl Date {
    pub fn new(year: i32, month: u32, day: u32) -> Option<Self> {
        let d = Date { year, month, day };
        d.is_valid().then_some(d)
    }

    pub fn is_leap(year: i32) -> bool {
        (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
    }

    pub fn days_in_month(year: i32, month: u32) -> u32 {
        match month {
            1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
            4 | 6 | 9 | 11 => 30,
            2 if Self::is_leap(year) => 29,
            2 => 28,
            _ => 0,
        }
    }

    pub fn is_valid(&self) -> bool {
        (1..=12).contains(&self.month)
            && self.day >= 1
            && self.day <= Self::days_in_month(self.year, self.month)
    }

    /// Parses `YYYY-MM-DD`.
    pub fn parse(s: &str) -> Option<Self> {
        let mut it = s.split('-');
        let y = it.next()?.parse().ok()?;
        let m = it.next()?.parse().ok()?;
        let d = it.next()?.parse().ok()?;
        if it.next().is_some() {
            return None;
        }
        Self::new(y, m, d)
    }

    /// Whole years from `self` to `on`.
    pub fn age_on(&self, on: Date) -> i32 {
        let mut a = on.year - self.year;
        if (on.month, on.day) < (self.month, self.day) {
            a -= 1;
        }
        a
    }
}

impl std::fmt::Display for Date {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sex {
    Female,
    Male,
}

impl Sex {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "female" => Some(Sex::Female),
            "male" => Some(Sex::Male),
            _ => None,
        }
    }
}

/// What a scheme may use to generate an identifier that agrees with a profile.
#[derive(Debug, Clone)]
pub struct Subject<'a> {
    pub given_name: &'a str,
    pub surname: &'a str,
    pub sex: Sex,
    pub birth_date: Date,
    /// ISO 3166-1 alpha-3 of the country of birth.
    pub birth_country_iso3: &'a str,
    pub birth_city: &'a str,
    /// GeoNames admin1 code of the birth city, when it lies in the issuing country.
    pub birth_admin1: Option<&'a str>,
}

/// What an identifier says about its holder.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    pub document: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub birth_date: Option<Date>,
    /// When only the year (or a year without the day) is encoded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub birth_year: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub birth_month: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sex: Option<Sex>,
    /// Region code as encoded (state, province, district...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Whether the encoded region says "born abroad" (France 99, Mexico NE, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub born_abroad: Option<bool>,
    /// Letters derived from the name (Mexico CURP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name_letters: Option<String>,
}

/// Why an identifier is not valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// Wrong length, characters or layout.
    Syntax(String),
    CheckDigit(String),
    /// An encoded date that is not a calendar date.
    InvalidDate(String),
    /// A reserved, never-issued or otherwise impossible value.
    Impossible(String),
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Syntax(m) => write!(f, "syntax: {m}"),
            Problem::CheckDigit(m) => write!(f, "check digit: {m}"),
            Problem::InvalidDate(m) => write!(f, "invalid date: {m}"),
            Problem::Impossible(m) => write!(f, "impossible value: {m}"),
        }
    }
}

/// Stands in for "today" wherever a scheme needs it, in every country: to pick the century of
/// a two-digit year and to rule out birth dates in the future. It is a constant so that
/// decoding never depends on the clock and a build stays reproducible; it must not precede
/// the build date (the config check enforces this) and moves forward with the rules' vintage.
pub const RULES_AS_OF: Date = Date {
    year: 2026,
    month: 12,
    day: 31,
};

pub trait Scheme: Send + Sync {
    /// ISO 3166-1 alpha-3 of the issuing country.
    fn iso3(&self) -> &'static str;
    /// Short name of the document, e.g. "CPF".
    fn document(&self) -> &'static str;
    /// The compact form: separators removed, letters upper-cased, local digits mapped to ASCII.
    fn normalize(&self, raw: &str) -> String;
    /// Syntax, check digits, and decoding of what the identifier encodes.
    fn decode(&self, id: &str) -> Result<Evidence, Problem>;
    /// An identifier valid by construction that agrees with the subject.
    fn generate(&self, subject: &Subject, rng: &mut StageRng) -> String;
    /// Rules of the reference that are uncertain and were therefore not enforced.
    fn uncertainties(&self) -> &'static [&'static str] {
        &[]
    }
}

pub mod countries_a;
pub mod countries_b;

/// Every scheme, one per frame country.
pub fn all() -> Vec<&'static dyn Scheme> {
    let mut v = countries_a::schemes();
    v.extend(countries_b::schemes());
    v
}

/// The compact layout of each country's identifier as a regular expression: a hint for
/// constrained decoders (the JSON Schema of LLM answers), never the validator. A test checks
/// that every generated identifier matches its pattern.
pub fn syntax_pattern(iso3: &str) -> Option<&'static str> {
    Some(match iso3 {
        "USA" => "^[0-8][0-9]{8}$",
        "CHN" => "^[1-9][0-9]{16}[0-9X]$",
        "IND" => "^[2-9][0-9]{11}$",
        "BRA" => "^[0-9]{11}$",
        "MEX" => "^[A-Z]{4}[0-9]{6}[HM][A-Z]{5}[0-9A-Z][0-9]$",
        "NGA" => "^[0-9]{11}$",
        "DEU" => "^[1-9][0-9]{10}$",
        "JPN" => "^[0-9]{12}$",
        "GBR" => "^[A-Z]{2}[0-9]{6}[A-D]$",
        "CAN" => "^[1-79][0-9]{8}$",
        "COL" => "^[0-9]{6,10}$",
        "FRA" => "^[12][0-9]{4}(2A|2B|[0-9]{2})[0-9]{8}$",
        "POL" => "^[0-9]{11}$",
        "KOR" => "^[0-9]{13}$",
        "IDN" => "^[0-9]{16}$",
        "PHL" => "^[0-9]{12}$",
        "VNM" => "^[0-9]{12}$",
        "PAK" => "^[1-7][0-9]{12}$",
        "BGD" => "^[0-9]{17}$",
        "EGY" => "^[23][0-9]{13}$",
        "TUR" => "^[1-9][0-9]{10}$",
        "IRN" => "^[0-9]{10}$",
        "ETH" => "^[0-9]{12}$",
        "ZAF" => "^[0-9]{13}$",
        "KEN" => "^A[0-9]{9}[A-Z]$",
        "AUS" => "^[0-9]{9}$",
        _ => return None,
    })
}

/// The scheme of a country (ISO 3166-1 alpha-3).
pub fn for_country(iso3: &str) -> Option<&'static dyn Scheme> {
    all()
        .into_iter()
        .find(|s| s.iso3().eq_ignore_ascii_case(iso3))
}
