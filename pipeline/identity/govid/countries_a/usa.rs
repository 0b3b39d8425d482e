//! United States: Social Security Number (SSN), written `AAA-GG-SSSS` (area, group, serial).
//!
//! No check digit. Since randomization (2011-06-25) the number encodes nothing about the holder.

use super::{compact, evidence, exact_digits, number};
use crate::identity::govid::{Evidence, Problem, Scheme, Subject};
use crate::seeding::StageRng;
use rand::Rng;

pub struct Ssn;

pub static SCHEME: Ssn = Ssn;

/// Numbers that circulated publicly (a wallet-card sample and advertising) and belong to no one.
const MISUSED: [&str; 3] = ["078051120", "219099999", "457555462"];

impl Scheme for Ssn {
    fn iso3(&self) -> &'static str {
        "USA"
    }

    fn document(&self) -> &'static str {
        "SSN"
    }

    fn normalize(&self, raw: &str) -> String {
        compact(raw, false)
    }

    fn decode(&self, id: &str) -> Result<Evidence, Problem> {
        let d = exact_digits(id, 9)?;
        let area = number(&d[0..3]);
        if area == 0 || area == 666 || area >= 900 {
            return Err(Problem::Impossible(format!(
                "area {area:03} is never assigned"
            )));
        }
        if number(&d[3..5]) == 0 {
            return Err(Problem::Impossible("group 00 is never assigned".into()));
        }
        if number(&d[5..9]) == 0 {
            return Err(Problem::Impossible("serial 0000 is never assigned".into()));
        }
        if MISUSED.contains(&id) {
            return Err(Problem::Impossible(format!(
                "{id} is a publicly misused number"
            )));
        }
        Ok(evidence(self.document()))
    }

    /// Uniform over the assignable space: area 001-665 or 667-899, group 01-99, serial
    /// 0001-9999, never one of the misused numbers. The SSA reserves no range inside that
    /// space, so a generated number may coincide with a real one.
    fn generate(&self, _subject: &Subject, rng: &mut StageRng) -> String {
        loop {
            let mut area = rng.random_range(1..=898u32);
            if area >= 666 {
                area += 1;
            }
            let group = rng.random_range(1..=99u32);
            let serial = rng.random_range(1..=9999u32);
            let id = format!("{area:03}{group:02}{serial:04}");
            if !MISUSED.contains(&id.as_str()) {
                return id;
            }
        }
    }

    fn uncertainties(&self) -> &'static [&'static str] {
        &[
            "No range inside the assignable SSN space is reserved for fiction, so generated numbers may coincide with issued ones.",
            "The often-cited advertising range 987-65-4320..987-65-4329 is not confirmed by the SSA; it lies in area 9xx, which is rejected, so it is not used.",
            "Area numbers issued before 2011-06-25 reflected the mailing-address state; that mapping is not decoded.",
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit;
    use super::*;

    #[test]
    fn accepts_well_formed_numbers_and_normalizes_separators() {
        assert_eq!(SCHEME.normalize(" 123-45-6789 "), "123456789");
        let ev = SCHEME.decode("123456789").unwrap();
        assert_eq!(ev.document, "SSN");
        assert_eq!(ev, evidence("SSN"));
        for ok in ["001010001", "665999999", "667010001", "899999999"] {
            assert!(SCHEME.decode(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn rejects_never_assigned_areas_groups_and_serials() {
        for bad in [
            "000123456",
            "666123456",
            "900123456",
            "987654320",
            "999123456",
            "123006789",
            "123450000",
        ] {
            assert!(
                matches!(SCHEME.decode(bad), Err(Problem::Impossible(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn rejects_misused_numbers() {
        for bad in ["078-05-1120", "219-09-9999", "457-55-5462"] {
            let id = SCHEME.normalize(bad);
            assert!(
                matches!(SCHEME.decode(&id), Err(Problem::Impossible(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn rejects_malformed_input() {
        for bad in ["12345678", "1234567890", "12345678A", "123-45-6789", ""] {
            assert!(
                matches!(SCHEME.decode(bad), Err(Problem::Syntax(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn generated_numbers_are_valid_and_vary() {
        let mut rng = crate::seeding::rng(1, "test", "usa");
        let mut seen = std::collections::BTreeSet::new();
        for s in testkit::subjects("USA", &["NY", "CA"]) {
            for _ in 0..50 {
                let id = SCHEME.generate(&s, &mut rng);
                let ev = SCHEME.decode(&id).unwrap();
                assert_eq!(ev, evidence("SSN"));
                seen.insert(id);
            }
        }
        assert!(seen.len() > 290);
    }
}
