//! Kenya: KRA PIN (Kenya Revenue Authority Personal Identification Number), 11 characters:
//! `A` (individual) or `P` (non-individual), nine digits and a final letter.
//!
//! The national ID card number has no published structure and the Maisha Namba's format is
//! not confirmed, so the KRA PIN is the identifier used for persons.

use super::super::{Evidence, Problem, Scheme, Subject};
use super::compact;
use crate::seeding::StageRng;
use rand::Rng;

pub struct KraPin;

pub static SCHEME: KraPin = KraPin;

impl Scheme for KraPin {
    fn iso3(&self) -> &'static str {
        "KEN"
    }

    fn document(&self) -> &'static str {
        "KRA PIN"
    }

    fn normalize(&self, raw: &str) -> String {
        compact(raw, false)
    }

    fn decode(&self, id: &str) -> Result<Evidence, Problem> {
        let c: Vec<char> = id.chars().collect();
        if c.len() != 11 {
            return Err(Problem::Syntax(format!(
                "expected 11 characters, got {}",
                c.len()
            )));
        }
        let digits_ok = c[1..10].iter().all(|x| x.is_ascii_digit());
        if !matches!(c[0], 'A' | 'P') || !digits_ok || !c[10].is_ascii_uppercase() {
            return Err(Problem::Syntax(
                "expected A or P, nine digits and a letter".into(),
            ));
        }
        if c[0] == 'P' {
            return Err(Problem::Impossible(
                "a P PIN belongs to a non-individual taxpayer, not a person".into(),
            ));
        }
        // The final letter is believed to be a check character, but its algorithm is not
        // published: any letter is accepted.
        Ok(Evidence {
            document: self.document().into(),
            ..Evidence::default()
        })
    }

    fn generate(&self, _subject: &Subject, rng: &mut StageRng) -> String {
        let digits: u32 = rng.random_range(0..1_000_000_000);
        let letter = char::from(b'A' + rng.random_range(0..26u8));
        format!("A{digits:09}{letter}")
    }

    fn uncertainties(&self) -> &'static [&'static str] {
        &[
            "The final letter is not checked: its algorithm is not published.",
            "PINs starting with P (non-individuals) are rejected for persons.",
            "No reserved range exists: a generated PIN can coincide with a real one.",
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{rng, subject};
    use super::*;
    use crate::identity::govid::Sex;

    #[test]
    fn reference_samples() {
        assert_eq!(SCHEME.normalize("a004416331m"), "A004416331M");
        let ev = SCHEME.decode("A004416331M").unwrap();
        assert_eq!(
            ev,
            Evidence {
                document: "KRA PIN".into(),
                ..Evidence::default()
            }
        );
        assert!(matches!(
            SCHEME.decode("P051365947M"),
            Err(Problem::Impossible(_))
        ));
    }

    #[test]
    fn malformed_pins_are_rejected() {
        for id in [
            "A00441633M",
            "A004416331MM",
            "|004416331M",
            "B004416331M",
            "A0044163X1M",
            "A0044163311",
            "A004416331m",
            "0A04416331M",
            "",
        ] {
            assert!(matches!(SCHEME.decode(id), Err(Problem::Syntax(_))), "{id}");
        }
    }

    #[test]
    fn generated_pins_are_valid() {
        let s = subject(Sex::Male, (1985, 4, 4), "KEN", Some("05"));
        let mut r = rng("ken");
        for _ in 0..300 {
            let id = SCHEME.generate(&s, &mut r);
            assert!(SCHEME.decode(&id).is_ok(), "{id}");
            assert!(id.starts_with('A'));
        }
    }
}
