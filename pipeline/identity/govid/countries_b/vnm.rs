//! Vietnam: personal identification number (Số định danh cá nhân), the 12-digit number on
//! the Căn cước công dân and Căn cước cards.
//!
//! Digits 1-3 are the province (or country) where the birth was registered, digit 4 the
//! century and sex, digits 5-6 the last two digits of the birth year, and the last six are
//! random. There is no check digit.

use super::super::{Evidence, Problem, Scheme, Sex, Subject};
use super::{compact, exact_digits, number, AS_OF};
use crate::seeding::StageRng;
use rand::Rng;

pub struct PersonalId;

pub static SCHEME: PersonalId = PersonalId;

/// Province codes used by generation: the codes of the 34 provinces formed in 2025, each of
/// which is the code of one of the 63 earlier provinces (for example 001 Hà Nội, 031 Hải
/// Phòng, 048 Đà Nẵng, 079 Hồ Chí Minh City, 092 Cần Thơ), so every one is in use.
const PROVINCES: [&str; 34] = [
    "01", "04", "08", "11", "12", "14", "15", "19", "20", "22", "24", "25", "31", "33", "37", "38",
    "40", "42", "44", "46", "48", "51", "52", "56", "66", "68", "75", "79", "80", "82", "86", "91",
    "92", "96",
];

/// First and last birth year the century digit can express.
const FIRST_YEAR: i32 = 1900;
const LAST_YEAR: i32 = 2399;

/// The place code for a GeoNames admin1 code of Vietnam. GeoNames numbers the provinces with
/// their two-digit administrative codes, which the place code writes with a leading zero.
pub fn place_of_admin1(admin1: &str) -> Option<String> {
    PROVINCES.contains(&admin1).then(|| format!("0{admin1}"))
}

impl Scheme for PersonalId {
    fn iso3(&self) -> &'static str {
        "VNM"
    }

    fn document(&self) -> &'static str {
        "CCCD"
    }

    fn normalize(&self, raw: &str) -> String {
        compact(raw, false)
    }

    fn decode(&self, id: &str) -> Result<Evidence, Problem> {
        let d = exact_digits(id, 12)?;
        // Any place code is accepted: the codes used for births registered abroad, and for
        // registrations after the 2025 merger of provinces, are not confirmed.
        let sex = if d[3] % 2 == 0 {
            Sex::Male
        } else {
            Sex::Female
        };
        let year = FIRST_YEAR + 100 * (d[3] / 2) as i32 + number(&d[4..6]) as i32;
        if year > AS_OF.year {
            return Err(Problem::Impossible(format!(
                "birth year {year} lies after {}",
                AS_OF.year
            )));
        }
        Ok(Evidence {
            document: self.document().into(),
            birth_year: Some(year),
            sex: Some(sex),
            region: Some(id[0..3].to_string()),
            ..Evidence::default()
        })
    }

    fn generate(&self, subject: &Subject, rng: &mut StageRng) -> String {
        // Births in Vietnam get the province of their admin1 code. Births abroad would carry a
        // country code whose range is not confirmed, and unmapped admin1 codes have no
        // province: both get a province code drawn from the rng.
        let place = match (subject.birth_country_iso3, subject.birth_admin1) {
            ("VNM", Some(a1)) => place_of_admin1(a1),
            _ => None,
        }
        .unwrap_or_else(|| format!("0{}", PROVINCES[rng.random_range(0..PROVINCES.len())]));
        // Years outside what the century digit can express are clamped.
        let year = subject
            .birth_date
            .year
            .clamp(FIRST_YEAR, LAST_YEAR.min(AS_OF.year));
        let offset = (year - FIRST_YEAR) as u32;
        let century_sex = 2 * (offset / 100)
            + match subject.sex {
                Sex::Male => 0,
                Sex::Female => 1,
            };
        let random: u32 = rng.random_range(0..1_000_000);
        format!("{place}{century_sex}{:02}{random:06}", offset % 100)
    }

    fn uncertainties(&self) -> &'static [&'static str] {
        &[
            "Place codes are not checked: the codes of births registered abroad and of \
             registrations after the 2025 merger of provinces are not confirmed. Whether a \
             code means a birth abroad is therefore not decoded.",
            "Subjects born abroad, or in an unmapped admin1, get a province code drawn from the \
             rng.",
            "There is no check digit and the last six digits are random: a generated number can \
             coincide with a real one.",
            "Birth years after the as-of year (2026) are rejected as impossible.",
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{rng, subject};
    use super::*;

    #[test]
    fn reference_example_decodes() {
        // 001 Hà Nội, male, born 2005.
        assert_eq!(SCHEME.normalize("001 205 123456"), "001205123456");
        let ev = SCHEME.decode("001205123456").unwrap();
        assert_eq!(ev.document, "CCCD");
        assert_eq!(ev.birth_year, Some(2005));
        assert_eq!(ev.birth_date, None);
        assert_eq!(ev.sex, Some(Sex::Male));
        assert_eq!(ev.region.as_deref(), Some("001"));
    }

    #[test]
    fn century_and_sex_digit() {
        let cases = [
            ("079087000001", 1987, Sex::Male),
            ("079187000001", 1987, Sex::Female),
            ("092200000001", 2000, Sex::Male),
            ("092324000001", 2024, Sex::Female),
            ("048199000001", 1999, Sex::Female),
            ("031000000001", 1900, Sex::Male),
        ];
        for (id, year, sex) in cases {
            let ev = SCHEME.decode(id).unwrap();
            assert_eq!(ev.birth_year, Some(year), "{id}");
            assert_eq!(ev.sex, Some(sex), "{id}");
        }
    }

    #[test]
    fn malformed_numbers_are_rejected() {
        for id in [
            "00120512345",
            "0012051234567",
            "00120512345X",
            "001-205-123456",
        ] {
            assert!(matches!(SCHEME.decode(id), Err(Problem::Syntax(_))), "{id}");
        }
        // 2030, 2105 and 2399 are after the as-of year.
        for id in ["001230123456", "001405123456", "001999123456"] {
            assert!(
                matches!(SCHEME.decode(id), Err(Problem::Impossible(_))),
                "{id}"
            );
        }
    }

    #[test]
    fn generated_numbers_decode_to_the_subject() {
        let subjects = [
            subject(Sex::Male, (2005, 3, 1), "VNM", Some("01")),
            subject(Sex::Female, (1958, 11, 30), "VNM", Some("79")),
            subject(Sex::Female, (1999, 12, 31), "FRA", None),
            subject(Sex::Male, (1946, 1, 1), "VNM", Some("00")),
        ];
        let mut r = rng("vnm");
        for s in &subjects {
            for _ in 0..50 {
                let id = SCHEME.generate(s, &mut r);
                let ev = SCHEME.decode(&id).unwrap_or_else(|e| panic!("{id}: {e}"));
                assert_eq!(ev.birth_year, Some(s.birth_date.year));
                assert_eq!(ev.sex, Some(s.sex));
                let place = ev.region.unwrap();
                assert!(PROVINCES.contains(&&place[1..]) && place.starts_with('0'));
                if s.birth_admin1 == Some("79") {
                    assert_eq!(place, "079");
                }
                if s.birth_admin1 == Some("01") {
                    assert_eq!(place, "001");
                }
            }
        }
    }
}
