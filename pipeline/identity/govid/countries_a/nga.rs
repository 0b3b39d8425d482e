//! Nigeria: National Identification Number (NIN), 11 digits assigned at random ("non-intelligent").
//! No check digit is published and nothing about the holder is encoded.

use super::{compact, evidence, exact_digits, random_digits, render};
use crate::identity::govid::{Evidence, Problem, Scheme, Subject};
use crate::seeding::StageRng;

pub struct Nin;

pub static SCHEME: Nin = Nin;

impl Scheme for Nin {
    fn iso3(&self) -> &'static str {
        "NGA"
    }

    fn document(&self) -> &'static str {
        "NIN"
    }

    fn normalize(&self, raw: &str) -> String {
        compact(raw, false)
    }

    /// Length and digits only: no check digit or reserved value is documented.
    fn decode(&self, id: &str) -> Result<Evidence, Problem> {
        exact_digits(id, 11)?;
        Ok(evidence(self.document()))
    }

    /// Eleven random digits. No range is reserved for fiction, so a generated number may
    /// coincide with an issued one.
    fn generate(&self, _subject: &Subject, rng: &mut StageRng) -> String {
        render(&random_digits(rng, 11))
    }

    fn uncertainties(&self) -> &'static [&'static str] {
        &[
            "No check digit is published; only length and digits are validated.",
            "A 9-digit form mentioned by one 2012 source is not accepted (current sources say 11 digits).",
            "No range is reserved for fiction, so generated numbers may coincide with issued ones.",
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit;
    use super::*;

    #[test]
    fn accepts_eleven_digits_in_any_grouping() {
        assert_eq!(SCHEME.normalize("123 4567 8901"), "12345678901");
        assert_eq!(SCHEME.decode("12345678901"), Ok(evidence("NIN")));
        assert_eq!(SCHEME.decode("00000000000"), Ok(evidence("NIN")));
    }

    #[test]
    fn rejects_malformed_input() {
        for bad in ["1234567890", "123456789012", "1234567890A", "123456789", ""] {
            assert!(
                matches!(SCHEME.decode(bad), Err(Problem::Syntax(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn generated_numbers_are_valid() {
        let mut rng = crate::seeding::rng(1, "test", "nga");
        let mut seen = std::collections::BTreeSet::new();
        for s in testkit::subjects("NGA", &["05", "11"]) {
            for _ in 0..20 {
                let id = SCHEME.generate(&s, &mut rng);
                assert_eq!(SCHEME.decode(&id), Ok(evidence("NIN")), "{id}");
                seen.insert(id);
            }
        }
        assert_eq!(seen.len(), 120);
    }
}
