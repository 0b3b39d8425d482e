//! India: Aadhaar number, 12 digits, first digit 2-9, Verhoeff check digit in position 12.
//! The number is random and encodes nothing about the holder.

use super::{compact, evidence, exact_digits, random_digits, render};
use crate::identity::govid::checks;
use crate::identity::govid::{Evidence, Problem, Scheme, Subject};
use crate::seeding::StageRng;
use rand::Rng;

pub struct Aadhaar;

pub static SCHEME: Aadhaar = Aadhaar;

impl Scheme for Aadhaar {
    fn iso3(&self) -> &'static str {
        "IND"
    }

    fn document(&self) -> &'static str {
        "Aadhaar"
    }

    fn normalize(&self, raw: &str) -> String {
        compact(raw, false)
    }

    fn decode(&self, id: &str) -> Result<Evidence, Problem> {
        let d = exact_digits(id, 12)?;
        if d[0] < 2 {
            return Err(Problem::Impossible(
                "the first digit is never 0 or 1".into(),
            ));
        }
        if !checks::verhoeff_valid(&d) {
            return Err(Problem::CheckDigit("Verhoeff check failed".into()));
        }
        if d.iter().eq(d.iter().rev()) {
            return Err(Problem::Impossible(
                "palindromic numbers are not issued".into(),
            ));
        }
        Ok(evidence(self.document()))
    }

    /// A random Verhoeff-valid number with first digit 2-9 (never a palindrome). No range is
    /// reserved for fiction, so a generated number may coincide with an issued one.
    fn generate(&self, _subject: &Subject, rng: &mut StageRng) -> String {
        loop {
            let mut d = vec![rng.random_range(2..10u32)];
            d.extend(random_digits(rng, 10));
            d.push(checks::verhoeff_digit(&d));
            if !d.iter().eq(d.iter().rev()) {
                return render(&d);
            }
        }
    }

    fn uncertainties(&self) -> &'static [&'static str] {
        &[
            "The sandbox test numbers 999941057058 and 999971658847 are attested only by secondary sources; they are accepted like any valid number but not used for generation.",
            "No range is reserved for fiction, so generated numbers may coincide with issued ones.",
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{self, substitutions, DIGITS};
    use super::*;

    #[test]
    fn reference_specimens_are_valid() {
        assert_eq!(SCHEME.normalize("2341 2341 2346"), "234123412346");
        for id in ["234123412346", "999941057058", "999971658847"] {
            assert_eq!(SCHEME.decode(id), Ok(evidence("Aadhaar")), "{id}");
        }
    }

    #[test]
    fn every_single_substitution_is_rejected() {
        let mut rng = crate::seeding::rng(1, "test", "ind-subst");
        let mut ids = vec!["234123412346".to_string()];
        for s in testkit::subjects("IND", &[]) {
            ids.push(SCHEME.generate(&s, &mut rng));
        }
        for id in &ids {
            for (i, c, m) in substitutions(id, DIGITS) {
                assert!(SCHEME.decode(&m).is_err(), "{id}: {c} at {i} accepted");
            }
        }
    }

    #[test]
    fn rejects_impossible_and_malformed_numbers() {
        // Verhoeff-valid, but starting with 0 or 1.
        let mut low = checks::digits("12341234123").unwrap();
        low.push(checks::verhoeff_digit(&low));
        assert!(matches!(
            SCHEME.decode(&render(&low)),
            Err(Problem::Impossible(_))
        ));
        // A Verhoeff-valid palindrome.
        let pal = (200_000..1_000_000u32)
            .map(|n| {
                let half = checks::digits(&n.to_string()).unwrap();
                let mut d = half.clone();
                d.extend(half.iter().rev());
                d
            })
            .find(|d| checks::verhoeff_valid(d))
            .map(|d| render(&d))
            .expect("a Verhoeff-valid palindrome exists");
        assert!(
            matches!(SCHEME.decode(&pal), Err(Problem::Impossible(_))),
            "{pal}"
        );
        assert!(matches!(
            SCHEME.decode("234123412347"),
            Err(Problem::CheckDigit(_))
        ));
        for bad in ["23412341234", "2341234123460", "23412341234A"] {
            assert!(
                matches!(SCHEME.decode(bad), Err(Problem::Syntax(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn generated_numbers_are_valid() {
        let mut rng = crate::seeding::rng(1, "test", "ind");
        for s in testkit::subjects("IND", &["07", "16"]) {
            for _ in 0..20 {
                let id = SCHEME.generate(&s, &mut rng);
                assert_eq!(SCHEME.decode(&id), Ok(evidence("Aadhaar")), "{id}");
            }
        }
    }
}
