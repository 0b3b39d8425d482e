//! Germany: steuerliche Identifikationsnummer (IdNr, "Steuer-ID"), 11 digits written
//! `NN NNN NNN NNN`. The first digit is not 0; among the first ten digits exactly one value
//! occurs twice or three times and no other repeats; the eleventh is an ISO 7064 MOD 11,10
//! check digit. Nothing about the holder is encoded.

use super::{compact, evidence, exact_digits, render};
use crate::identity::govid::checks;
use crate::identity::govid::{Evidence, Problem, Scheme, Subject};
use crate::seeding::StageRng;
use rand::seq::SliceRandom;
use rand::Rng;

pub struct IdNr;

pub static SCHEME: IdNr = IdNr;

/// Whether ten digits satisfy the distribution rule: one value twice or three times, every
/// other value at most once.
fn distribution_ok(d: &[u32]) -> bool {
    let mut counts = [0u32; 10];
    for &x in d {
        counts[x as usize] += 1;
    }
    let repeated: Vec<u32> = counts.iter().copied().filter(|&n| n > 1).collect();
    matches!(repeated.as_slice(), [2] | [3])
}

impl Scheme for IdNr {
    fn iso3(&self) -> &'static str {
        "DEU"
    }

    fn document(&self) -> &'static str {
        "Steuer-IdNr"
    }

    fn normalize(&self, raw: &str) -> String {
        compact(raw, false)
    }

    // Secondary sources add that a digit occurring three times may not do so in three
    // consecutive positions; the reference leaves that unconfirmed, so it is not enforced.
    fn decode(&self, id: &str) -> Result<Evidence, Problem> {
        let d = exact_digits(id, 11)?;
        if d[0] == 0 {
            return Err(Problem::Syntax("the first digit is not 0".into()));
        }
        let expected = checks::iso7064_mod11_10(&d[..10]);
        if d[10] != expected {
            return Err(Problem::CheckDigit(format!(
                "expected {expected}, found {}",
                d[10]
            )));
        }
        if !distribution_ok(&d[..10]) {
            return Err(Problem::Impossible(
                "the first ten digits must repeat exactly one value, two or three times".into(),
            ));
        }
        Ok(evidence(self.document()))
    }

    /// Nine distinct digits plus one of them a second time, shuffled with a non-zero lead,
    /// then the check digit. With one digit twice the disputed "no three in a row" rule is
    /// satisfied too. No range is reserved for fiction, so a generated number may coincide
    /// with an issued one.
    fn generate(&self, _subject: &Subject, rng: &mut StageRng) -> String {
        let mut pool: Vec<u32> = (0..10).collect();
        pool.shuffle(rng);
        let mut d: Vec<u32> = pool[..9].to_vec();
        d.push(d[rng.random_range(0..9)]);
        loop {
            d.shuffle(rng);
            if d[0] != 0 {
                break;
            }
        }
        d.push(checks::iso7064_mod11_10(&d));
        render(&d)
    }

    fn uncertainties(&self) -> &'static [&'static str] {
        &[
            "The rule that a digit occurring three times may not do so three times in a row is unconfirmed and not enforced (generated numbers repeat a digit only twice, so they satisfy it).",
            "A plain weighted mod-11 variant described by one web page is disputed; only ISO 7064 MOD 11,10 is used.",
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
        assert_eq!(SCHEME.normalize("36 574 261 809"), "36574261809");
        for id in ["36574261809", "12345678995"] {
            assert_eq!(SCHEME.decode(id), Ok(evidence("Steuer-IdNr")), "{id}");
        }
    }

    #[test]
    fn every_single_substitution_is_rejected() {
        let mut rng = crate::seeding::rng(1, "test", "deu-subst");
        let mut ids = vec!["36574261809".to_string(), "12345678995".to_string()];
        for s in testkit::subjects("DEU", &[]) {
            ids.push(SCHEME.generate(&s, &mut rng));
        }
        for id in &ids {
            for (i, c, m) in substitutions(id, DIGITS) {
                assert!(SCHEME.decode(&m).is_err(), "{id}: {c} at {i} accepted");
            }
        }
    }

    #[test]
    fn digit_distribution_rule() {
        assert!(distribution_ok(&checks::digits("3657426180").unwrap()));
        assert!(distribution_ok(&checks::digits("1123456789").unwrap()));
        assert!(distribution_ok(&checks::digits("1112345678").unwrap()));
        assert!(!distribution_ok(&checks::digits("1234567890").unwrap()));
        assert!(!distribution_ok(&checks::digits("1122345678").unwrap()));
        assert!(!distribution_ok(&checks::digits("1111234567").unwrap()));
        // Valid check digit, broken distribution.
        let mut d = checks::digits("1234567890").unwrap();
        d.push(checks::iso7064_mod11_10(&d));
        assert!(matches!(
            SCHEME.decode(&render(&d)),
            Err(Problem::Impossible(_))
        ));
        // Three in a row is accepted (the rule against it is unconfirmed).
        let mut d = checks::digits("1112345678").unwrap();
        d.push(checks::iso7064_mod11_10(&d));
        assert!(SCHEME.decode(&render(&d)).is_ok());
    }

    #[test]
    fn rejects_malformed_input() {
        assert!(matches!(
            SCHEME.decode("36574261808"),
            Err(Problem::CheckDigit(_))
        ));
        let mut d = checks::digits("0657426183").unwrap();
        d.push(checks::iso7064_mod11_10(&d));
        assert!(matches!(
            SCHEME.decode(&render(&d)),
            Err(Problem::Syntax(_))
        ));
        for bad in ["3657426180", "365742618090", "3657426180X"] {
            assert!(
                matches!(SCHEME.decode(bad), Err(Problem::Syntax(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn generated_numbers_are_valid() {
        let mut rng = crate::seeding::rng(1, "test", "deu");
        for s in testkit::subjects("DEU", &["01", "02"]) {
            for _ in 0..50 {
                let id = SCHEME.generate(&s, &mut rng);
                assert_eq!(SCHEME.decode(&id), Ok(evidence("Steuer-IdNr")), "{id}");
            }
        }
    }
}
