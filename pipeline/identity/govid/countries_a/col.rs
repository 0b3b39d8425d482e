//! Colombia: cédula de ciudadanía, 6 to 10 digits (often printed with thousands dots). The
//! cédula itself has no check digit and no documented encoded fields. When used as a tax NIT
//! a DIAN verification digit is appended; [`nit_check_digit`] computes it.

use super::{compact, evidence, random_digits, render};
use crate::identity::govid::checks;
use crate::identity::govid::{Evidence, Problem, Scheme, Subject};
use crate::seeding::StageRng;

pub struct Cedula;

pub static SCHEME: Cedula = Cedula;

/// DIAN weights, applied to the digits taken from the right.
const NIT_WEIGHTS: [u32; 15] = [3, 7, 13, 17, 19, 23, 29, 37, 41, 43, 47, 53, 59, 67, 71];

/// The DIAN verification digit of a NIT (a natural person's NIT is the cédula number):
/// r = Σ dᵢwᵢ mod 11 over the digits from the right; r when r ∈ {0, 1}, otherwise 11 − r.
/// `None` for anything but 1 to 15 digits.
pub fn nit_check_digit(number: &str) -> Option<u32> {
    let d = checks::digits(number)?;
    if d.is_empty() || d.len() > NIT_WEIGHTS.len() {
        return None;
    }
    let rev: Vec<u32> = d.iter().rev().copied().collect();
    let r = checks::weighted_sum(&rev, &NIT_WEIGHTS) % 11;
    Some(if r <= 1 { r } else { 11 - r })
}

impl Scheme for Cedula {
    fn iso3(&self) -> &'static str {
        "COL"
    }

    fn document(&self) -> &'static str {
        "Cédula"
    }

    fn normalize(&self, raw: &str) -> String {
        compact(raw, false)
    }

    // Length 6-10 and digits only. The lower bound is uncertain (very old cédulas may be
    // shorter), and the reported sex-split numbering blocks are unconfirmed, so sex is not
    // decoded.
    fn decode(&self, id: &str) -> Result<Evidence, Problem> {
        let n = id.chars().count();
        if !(6..=10).contains(&n) {
            return Err(Problem::Syntax(format!(
                "expected 6 to 10 digits, got {n} characters"
            )));
        }
        if checks::digits(id).is_none() {
            return Err(Problem::Syntax("only digits are allowed".into()));
        }
        Ok(evidence(self.document()))
    }

    /// A 10-digit number starting with 1, resembling current issuance (the reference's
    /// suggestion). No range is reserved for fiction, so a generated number may coincide
    /// with an issued one.
    fn generate(&self, _subject: &Subject, rng: &mut StageRng) -> String {
        let mut d = vec![1];
        d.extend(random_digits(rng, 9));
        render(&d)
    }

    fn uncertainties(&self) -> &'static [&'static str] {
        &[
            "The minimum length (6) is uncertain; very old cédulas may be shorter.",
            "Reported sex-based numbering blocks before 2003 and the NUIP carried over from birth registration are unconfirmed; nothing is decoded.",
            "No range is reserved for fiction, so generated numbers may coincide with issued ones.",
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit;
    use super::*;

    #[test]
    fn accepts_six_to_ten_digits_with_dots() {
        assert_eq!(SCHEME.normalize("1.023.456.789"), "1023456789");
        for ok in ["1023456789", "123456", "12345678", "213123432"] {
            assert_eq!(SCHEME.decode(ok), Ok(evidence("Cédula")), "{ok}");
        }
    }

    #[test]
    fn rejects_malformed_input() {
        for bad in ["12345", "12345678901", "12345A78", "", "1.023.456.789"] {
            assert!(
                matches!(SCHEME.decode(bad), Err(Problem::Syntax(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn nit_verification_digit_matches_the_reference() {
        let rev: Vec<u32> = checks::digits("213123432")
            .unwrap()
            .into_iter()
            .rev()
            .collect();
        assert_eq!(checks::weighted_sum(&rev, &NIT_WEIGHTS), 397);
        assert_eq!(nit_check_digit("213123432"), Some(1));
        assert_eq!(nit_check_digit("12A"), None);
        assert_eq!(nit_check_digit(""), None);
        assert_eq!(nit_check_digit("1234567890123456"), None);
    }

    /// The weights are primes other than 11, so a digit change always changes r; but r = 1
    /// and r = 10 both give verification digit 1. A single substitution escapes the digit
    /// exactly when it moves r between 1 and 10.
    #[test]
    fn nit_digit_misses_only_the_remainder_1_10_swap() {
        let base = "213123432";
        let r = |s: &str| {
            let rev: Vec<u32> = checks::digits(s).unwrap().into_iter().rev().collect();
            checks::weighted_sum(&rev, &NIT_WEIGHTS) % 11
        };
        assert_eq!(r(base), 1);
        for (i, c, m) in testkit::substitutions(base, testkit::DIGITS) {
            let same = nit_check_digit(&m) == nit_check_digit(base);
            assert_eq!(same, r(&m) == 10, "{c} at {i}");
        }
    }

    #[test]
    fn generated_numbers_are_valid() {
        let mut rng = crate::seeding::rng(1, "test", "col");
        for s in testkit::subjects("COL", &["34", "02"]) {
            for _ in 0..20 {
                let id = SCHEME.generate(&s, &mut rng);
                assert_eq!(id.len(), 10);
                assert!(id.starts_with('1'));
                assert_eq!(SCHEME.decode(&id), Ok(evidence("Cédula")), "{id}");
            }
        }
    }
}
