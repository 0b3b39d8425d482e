//! Turkey: T.C. Kimlik No (TCKN), 11 digits, the first not 0, the last two check digits.
//! It encodes nothing about its holder.

use super::super::{Evidence, Problem, Scheme, Subject};
use super::{compact, exact_digits};
use crate::seeding::StageRng;
use rand::Rng;

pub struct Tckn;

pub static SCHEME: Tckn = Tckn;

/// The two check digits of the first nine digits.
pub fn check_digits(first9: &[u32]) -> (u32, u32) {
    let odd: u32 = first9.iter().step_by(2).sum();
    let even: u32 = first9.iter().skip(1).step_by(2).sum();
    // 7·odd − even, kept non-negative: adding 10·even does not change the value mod 10.
    let d10 = (7 * odd + 9 * even) % 10;
    let d11 = (odd + even + d10) % 10;
    (d10, d11)
}

impl Scheme for Tckn {
    fn iso3(&self) -> &'static str {
        "TUR"
    }

    fn document(&self) -> &'static str {
        "TCKN"
    }

    fn normalize(&self, raw: &str) -> String {
        compact(raw, false)
    }

    fn decode(&self, id: &str) -> Result<Evidence, Problem> {
        let d = exact_digits(id, 11)?;
        if d[0] == 0 {
            return Err(Problem::Syntax("the first digit must not be 0".into()));
        }
        let (d10, d11) = check_digits(&d[..9]);
        if (d[9], d[10]) != (d10, d11) {
            return Err(Problem::CheckDigit(format!(
                "expected {d10}{d11}, found {}{}",
                d[9], d[10]
            )));
        }
        Ok(Evidence {
            document: self.document().into(),
            ..Evidence::default()
        })
    }

    fn generate(&self, _subject: &Subject, rng: &mut StageRng) -> String {
        let mut d: Vec<u32> = vec![rng.random_range(1..10)];
        d.extend((0..8).map(|_| rng.random_range(0..10u32)));
        let (d10, d11) = check_digits(&d);
        d.push(d10);
        d.push(d11);
        d.iter().map(|&x| char::from(b'0' + x as u8)).collect()
    }

    fn uncertainties(&self) -> &'static [&'static str] {
        &[
            "No official test range exists (10000000146 is a common dummy, not a reserved one): \
           a generated number can coincide with a real one.",
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::checks;
    use super::super::testkit::{digit_substitutions, rng, subject};
    use super::*;
    use crate::identity::govid::Sex;

    #[test]
    fn reference_examples_are_accepted() {
        assert_eq!(check_digits(&checks::digits("172917160").unwrap()), (6, 0));
        assert_eq!(SCHEME.normalize("172 917 160 60"), "17291716060");
        for id in ["17291716060", "10000000146", "11111111110"] {
            let ev = SCHEME.decode(id).unwrap();
            assert_eq!(ev.document, "TCKN");
            assert_eq!(
                ev,
                Evidence {
                    document: "TCKN".into(),
                    ..Evidence::default()
                }
            );
        }
    }

    #[test]
    fn every_substitution_is_rejected() {
        // A change δ of an odd-position digit moves d10 by 7δ, of an even one by −δ (mod 10):
        // neither is 0 for 0 < |δ| < 10, and changes of d10 or d11 break their own equation.
        for spec in ["17291716060", "10000000146", "98765432150"] {
            assert!(SCHEME.decode(spec).is_ok(), "{spec}");
            for (i, v, m) in digit_substitutions(spec) {
                assert!(
                    SCHEME.decode(&m).is_err(),
                    "{m} (position {i} -> {v}) accepted"
                );
            }
        }
    }

    #[test]
    fn malformed_numbers_are_rejected() {
        for id in [
            "1729171606",
            "172917160600",
            "1729171606X",
            "07291716060",
            "172-917-160-60",
        ] {
            assert!(matches!(SCHEME.decode(id), Err(Problem::Syntax(_))), "{id}");
        }
        assert!(matches!(
            SCHEME.decode("17291716061"),
            Err(Problem::CheckDigit(_))
        ));
        assert!(matches!(
            SCHEME.decode("17291716050"),
            Err(Problem::CheckDigit(_))
        ));
    }

    #[test]
    fn generated_numbers_are_valid() {
        let s = subject(Sex::Male, (1980, 1, 1), "TUR", Some("34"));
        let mut r = rng("tur");
        for _ in 0..500 {
            let id = SCHEME.generate(&s, &mut r);
            assert!(SCHEME.decode(&id).is_ok(), "{id}");
        }
    }
}
