//! Bangladesh: National ID (NID), in its 17-digit form `YYYY DD R UU WW SSSSSS`.
//!
//! Three generations of the NID are in circulation (10, 13 and 17 digits). This scheme
//! handles the 17-digit one only: the birth year followed by the 13-digit number (district,
//! RMO code, upazila or thana, union or ward, serial). It is the only form that encodes the
//! birth year, and the 10-digit smart-card number has an unpublished check digit that could
//! not be validated. 10- and 13-digit numbers are rejected as another variant.

use super::super::{Evidence, Problem, Scheme, Subject};
use super::{compact, number, AS_OF};
use crate::identity::govid::checks;
use crate::seeding::StageRng;
use rand::Rng;

pub struct Nid;

pub static SCHEME: Nid = Nid;

/// RMO codes: 1 rural, 2 municipality, 3 urban outside a municipality, 4 other, 5 cantonment,
/// 9 city corporation.
const RMO: [u32; 6] = [1, 2, 3, 4, 5, 9];

/// Earliest birth year taken as possible: the NID was first issued in 2007-2008.
const FIRST_YEAR: i32 = 1870;

/// District code of the divisional seat, for a GeoNames admin1 (division) code of Bangladesh.
/// District codes follow the national geocode list; only 26 (Dhaka) is confirmed by
/// shared/reference/government_ids.md.
pub fn district_of_admin1(admin1: &str) -> Option<&'static str> {
    Some(match admin1 {
        "81" => "26", // Dhaka
        "84" => "15", // Chattogram
        "82" => "47", // Khulna
        "83" => "81", // Rajshahi
        "85" => "06", // Barishal
        "86" => "91", // Sylhet
        "87" => "85", // Rangpur
        "H" => "61",  // Mymensingh
        _ => return None,
    })
}

const SEATS: [&str; 8] = ["26", "15", "47", "81", "06", "91", "85", "61"];

impl Scheme for Nid {
    fn iso3(&self) -> &'static str {
        "BGD"
    }

    fn document(&self) -> &'static str {
        "NID"
    }

    fn normalize(&self, raw: &str) -> String {
        compact(raw, false)
    }

    fn decode(&self, id: &str) -> Result<Evidence, Problem> {
        let len = id.chars().count();
        let d = checks::digits(id).ok_or_else(|| Problem::Syntax("expected digits only".into()))?;
        if len != 17 {
            let note = if len == 10 || len == 13 {
                " (the 10- and 13-digit NID forms are not handled)"
            } else {
                ""
            };
            return Err(Problem::Syntax(format!(
                "expected 17 digits, got {len}{note}"
            )));
        }
        let year = number(&d[0..4]) as i32;
        if !(FIRST_YEAR..=AS_OF.year).contains(&year) {
            return Err(Problem::Impossible(format!(
                "birth year {year} outside {FIRST_YEAR}-{}",
                AS_OF.year
            )));
        }
        if !RMO.contains(&d[6]) {
            return Err(Problem::Impossible(format!("unknown RMO code {}", d[6])));
        }
        Ok(Evidence {
            document: self.document().into(),
            birth_year: Some(year),
            region: Some(id[4..6].to_string()),
            ..Evidence::default()
        })
    }

    fn generate(&self, subject: &Subject, rng: &mut StageRng) -> String {
        // The district is the seat of the birth division; births abroad or in an unmapped
        // admin1 get one of the divisional seats drawn from the rng.
        let district = match (subject.birth_country_iso3, subject.birth_admin1) {
            ("BGD", Some(a1)) => district_of_admin1(a1),
            _ => None,
        }
        .unwrap_or_else(|| SEATS[rng.random_range(0..SEATS.len())]);
        let year = subject.birth_date.year.clamp(FIRST_YEAR, AS_OF.year);
        let rmo = RMO[rng.random_range(0..RMO.len())];
        let upazila: u32 = rng.random_range(1..100);
        let union: u32 = rng.random_range(1..100);
        let serial: u32 = rng.random_range(0..1_000_000);
        format!("{year:04}{district}{rmo}{upazila:02}{union:02}{serial:06}")
    }

    fn uncertainties(&self) -> &'static [&'static str] {
        &[
            "Only the 17-digit form (birth year + 13-digit number) is handled; 10-digit smart-card \
             and 13-digit laminated-card numbers are rejected. The 10-digit check digit is \
             unpublished.",
            "District, upazila and union codes are not checked, for lack of a table. Generation \
             maps the birth division to the district code of its seat (national geocode list; \
             only 26 = Dhaka is confirmed).",
            "Birth years before 1870 or after the as-of year (2026) are rejected as impossible.",
            "There is no check digit: a generated number can coincide with a real one.",
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{rng, subject};
    use super::*;
    use crate::identity::govid::Sex;

    #[test]
    fn reference_sample_decodes() {
        assert_eq!(
            SCHEME.normalize("1984 1592 8245 88424"),
            "19841592824588424"
        );
        let ev = SCHEME.decode("19841592824588424").unwrap();
        assert_eq!(ev.document, "NID");
        assert_eq!(ev.birth_year, Some(1984));
        assert_eq!(ev.region.as_deref(), Some("15"));
        assert_eq!(ev.sex, None);
    }

    #[test]
    fn rmo_codes() {
        for r in 0..10u32 {
            let id = format!("197026{r}1234567890");
            let ok = SCHEME.decode(&id).is_ok();
            assert_eq!(ok, RMO.contains(&r), "{id}");
            if !ok {
                assert!(matches!(SCHEME.decode(&id), Err(Problem::Impossible(_))));
            }
        }
    }

    #[test]
    fn malformed_numbers_are_rejected() {
        for id in [
            "1984159282458842",
            "198415928245884241",
            "1984159282458842X",
            "1592824588424",
            "1234567890",
            "1984-1592824588424",
        ] {
            assert!(matches!(SCHEME.decode(id), Err(Problem::Syntax(_))), "{id}");
        }
        for id in [
            "00001592824588424",
            "18001592824588424",
            "20301592824588424",
        ] {
            assert!(
                matches!(SCHEME.decode(id), Err(Problem::Impossible(_))),
                "{id}"
            );
        }
    }

    #[test]
    fn generated_numbers_decode_to_the_subject() {
        let subjects = [
            subject(Sex::Male, (1984, 6, 1), "BGD", Some("81")),
            subject(Sex::Female, (1950, 1, 1), "BGD", Some("H")),
            subject(Sex::Female, (2007, 12, 31), "IND", None),
        ];
        let mut r = rng("bgd");
        for s in &subjects {
            for _ in 0..50 {
                let id = SCHEME.generate(s, &mut r);
                let ev = SCHEME.decode(&id).unwrap_or_else(|e| panic!("{id}: {e}"));
                assert_eq!(ev.birth_year, Some(s.birth_date.year));
                let region = ev.region.unwrap();
                match s.birth_admin1 {
                    Some("81") => assert_eq!(region, "26"),
                    Some("H") => assert_eq!(region, "61"),
                    _ => assert!(SEATS.contains(&region.as_str())),
                }
            }
        }
    }
}
