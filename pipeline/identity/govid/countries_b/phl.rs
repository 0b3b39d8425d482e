//! Philippines: PhilSys Number (PSN), the 12-digit permanent number of the national ID
//! system. It is random and encodes nothing about its holder.

use super::super::{Evidence, Problem, Scheme, Subject};
use super::{compact, exact_digits, mosip_like};
use crate::seeding::StageRng;

pub struct Psn;

pub static SCHEME: Psn = Psn;

impl Scheme for Psn {
    fn iso3(&self) -> &'static str {
        "PHL"
    }

    fn document(&self) -> &'static str {
        "PSN"
    }

    fn normalize(&self, raw: &str) -> String {
        compact(raw, false)
    }

    fn decode(&self, id: &str) -> Result<Evidence, Problem> {
        // Twelve digits is all that is published. PhilSys runs on MOSIP, whose default UIN
        // policy ends with a Verhoeff digit and excludes a leading 0 or 1, but whether the PSN
        // keeps that policy is not public: neither rule is enforced.
        exact_digits(id, 12)?;
        Ok(Evidence {
            document: self.document().into(),
            ..Evidence::default()
        })
    }

    fn generate(&self, _subject: &Subject, rng: &mut StageRng) -> String {
        // The most defensible shape: MOSIP's default UIN rules (first digit 2-9, no repeated
        // or sequential digits, Verhoeff check digit), so the value also passes a validator
        // that does enforce them.
        mosip_like(rng, 12)
    }

    fn uncertainties(&self) -> &'static [&'static str] {
        &[
            "No check digit is published. MOSIP's default UIN policy (first digit not 0 or 1, \
             Verhoeff check digit, no runs or sequences) is followed when generating but not \
             enforced when validating.",
            "The 16-digit PhilSys Card Number (PCN) and the digit grouping are not handled; only \
             the 12-digit PSN is.",
            "No reserved range exists: a generated number can coincide with a real one.",
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{rng, subject};
    use super::super::{checks, mosip_pattern_free};
    use super::*;
    use crate::identity::govid::Sex;

    #[test]
    fn twelve_digits_are_accepted_without_fields() {
        assert_eq!(SCHEME.normalize("1234-5678-9012"), "123456789012");
        let ev = SCHEME.decode("123456789012").unwrap();
        assert_eq!(ev.document, "PSN");
        assert_eq!(ev.birth_date, None);
        assert_eq!(ev.sex, None);
        assert_eq!(ev.region, None);
        // A MOSIP sample UIN, Verhoeff-valid.
        assert!(SCHEME.decode("742192367293").is_ok());
        assert!(checks::verhoeff_valid(
            &checks::digits("742192367293").unwrap()
        ));
    }

    #[test]
    fn malformed_numbers_are_rejected() {
        for id in [
            "12345678901",
            "1234567890123",
            "12345678901A",
            "",
            "1234-5678-9012",
        ] {
            assert!(matches!(SCHEME.decode(id), Err(Problem::Syntax(_))), "{id}");
        }
    }

    #[test]
    fn generated_numbers_are_valid_and_mosip_shaped() {
        let s = subject(Sex::Female, (1980, 5, 6), "PHL", Some("NCR"));
        let mut r = rng("phl");
        for _ in 0..200 {
            let id = SCHEME.generate(&s, &mut r);
            let ev = SCHEME.decode(&id).unwrap();
            assert_eq!(ev.document, "PSN");
            let d = checks::digits(&id).unwrap();
            assert!(d[0] >= 2);
            assert!(checks::verhoeff_valid(&d));
            assert!(mosip_pattern_free(&d));
        }
    }
}
