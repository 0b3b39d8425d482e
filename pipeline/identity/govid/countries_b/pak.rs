//! Pakistan: CNIC (Computerised National Identity Card number), 13 digits written
//! `#####-#######-#`.
//!
//! Digit 1 is the province, digits 1-5 the locality, digits 6-12 a serial and digit 13 the
//! sex (odd male, even female). There is no check digit.

use super::super::{Evidence, Problem, Scheme, Sex, Subject};
use super::{compact, exact_digits};
use crate::seeding::StageRng;
use rand::Rng;

pub struct Cnic;

pub static SCHEME: Cnic = Cnic;

/// Province digit for a GeoNames admin1 code of Pakistan. Azad Kashmir (GeoNames 06) has no
/// documented digit.
pub fn province_of_admin1(admin1: &str) -> Option<char> {
    Some(match admin1 {
        "03" => '1', // Khyber Pakhtunkhwa
        "01" => '2', // former FATA
        "04" => '3', // Punjab
        "05" => '4', // Sindh
        "02" => '5', // Balochistan
        "08" => '6', // Islamabad
        "07" => '7', // Gilgit-Baltistan
        _ => return None,
    })
}

impl Scheme for Cnic {
    fn iso3(&self) -> &'static str {
        "PAK"
    }

    fn document(&self) -> &'static str {
        "CNIC"
    }

    fn normalize(&self, raw: &str) -> String {
        compact(raw, false)
    }

    fn decode(&self, id: &str) -> Result<Evidence, Problem> {
        let d = exact_digits(id, 13)?;
        if !(1..=7).contains(&d[0]) {
            return Err(Problem::Impossible(format!(
                "unknown province digit {}",
                d[0]
            )));
        }
        // A final 0 is rejected by some validators, but whether NADRA issues it is not
        // published: it is accepted and read as even.
        let sex = if d[12] % 2 == 1 {
            Sex::Male
        } else {
            Sex::Female
        };
        Ok(Evidence {
            document: self.document().into(),
            sex: Some(sex),
            region: Some(id[0..1].to_string()),
            ..Evidence::default()
        })
    }

    fn generate(&self, subject: &Subject, rng: &mut StageRng) -> String {
        // Province of the birth admin1 where documented; births abroad, in Azad Kashmir or in
        // an unmapped admin1 get a province digit drawn from the rng.
        let province = match (subject.birth_country_iso3, subject.birth_admin1) {
            ("PAK", Some(a1)) => province_of_admin1(a1),
            _ => None,
        }
        .unwrap_or_else(|| char::from(b'0' + rng.random_range(1..=7u8)));
        let locality: u32 = rng.random_range(0..10_000);
        let serial: u32 = rng.random_range(0..10_000_000);
        // Never 0 as the sex digit.
        let sex_digit = match subject.sex {
            Sex::Male => [1, 3, 5, 7, 9][rng.random_range(0..5)],
            Sex::Female => [2, 4, 6, 8][rng.random_range(0..4)],
        };
        format!("{province}{locality:04}{serial:07}{sex_digit}")
    }

    fn uncertainties(&self) -> &'static [&'static str] {
        &[
            "A last digit of 0 is accepted (read as female): whether NADRA issues it is not \
             published. Generated numbers never end in 0.",
            "The province digit of Azad Kashmir is not documented: subjects born there, abroad \
             or in an unmapped admin1 get a province digit drawn from the rng.",
            "Locality codes (digits 2-5) are not checked, for lack of a table.",
            "There is no check digit: a generated number can coincide with a real one.",
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{rng, subject};
    use super::*;

    #[test]
    fn reference_example_decodes() {
        assert_eq!(SCHEME.normalize("42201-0397640-8"), "4220103976408");
        let ev = SCHEME.decode("4220103976408").unwrap();
        assert_eq!(ev.document, "CNIC");
        assert_eq!(ev.region.as_deref(), Some("4"));
        assert_eq!(ev.sex, Some(Sex::Female));
        assert_eq!(ev.birth_date, None);
    }

    #[test]
    fn sex_digit() {
        for (last, sex) in [
            ('0', Sex::Female),
            ('1', Sex::Male),
            ('2', Sex::Female),
            ('7', Sex::Male),
            ('9', Sex::Male),
        ] {
            let id = format!("352020123456{last}");
            assert_eq!(SCHEME.decode(&id).unwrap().sex, Some(sex), "{id}");
        }
    }

    #[test]
    fn malformed_numbers_are_rejected() {
        for id in [
            "422010397640",
            "42201039764081",
            "42201O3976408",
            "42201-0397640-8",
        ] {
            assert!(matches!(SCHEME.decode(id), Err(Problem::Syntax(_))), "{id}");
        }
        for id in ["0220103976408", "8220103976408", "9220103976408"] {
            assert!(
                matches!(SCHEME.decode(id), Err(Problem::Impossible(_))),
                "{id}"
            );
        }
    }

    #[test]
    fn generated_numbers_decode_to_the_subject() {
        let subjects = [
            (
                subject(Sex::Male, (1980, 1, 1), "PAK", Some("05")),
                Some("4"),
            ),
            (
                subject(Sex::Female, (1990, 2, 2), "PAK", Some("04")),
                Some("3"),
            ),
            (
                subject(Sex::Female, (1970, 3, 3), "PAK", Some("08")),
                Some("6"),
            ),
            (subject(Sex::Male, (2000, 4, 4), "PAK", Some("06")), None),
            (subject(Sex::Female, (1965, 5, 5), "GBR", None), None),
        ];
        let mut r = rng("pak");
        for (s, province) in &subjects {
            for _ in 0..50 {
                let id = SCHEME.generate(s, &mut r);
                let ev = SCHEME.decode(&id).unwrap_or_else(|e| panic!("{id}: {e}"));
                assert_eq!(ev.sex, Some(s.sex));
                assert!(!id.ends_with('0'));
                if let Some(p) = province {
                    assert_eq!(ev.region.as_deref(), Some(*p));
                }
            }
        }
    }
}
