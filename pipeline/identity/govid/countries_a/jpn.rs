//! Japan: Individual Number ("My Number"), 12 digits, the last a weighted mod-11 check digit.
//! Nothing about the holder is encoded.

use super::{compact, evidence, exact_digits, random_digits, render};
use crate::identity::govid::checks;
use crate::identity::govid::{Evidence, Problem, Scheme, Subject};
use crate::seeding::StageRng;

pub struct MyNumber;

pub static SCHEME: MyNumber = MyNumber;

const WEIGHTS: [u32; 11] = [6, 5, 4, 3, 2, 7, 6, 5, 4, 3, 2];

/// r = Σ dᵢwᵢ mod 11; the check digit is 0 when r ≤ 1, otherwise 11 − r.
fn check_digit(payload: &[u32]) -> u32 {
    let r = checks::weighted_sum(payload, &WEIGHTS) % 11;
    if r <= 1 {
        0
    } else {
        11 - r
    }
}

impl Scheme for MyNumber {
    fn iso3(&self) -> &'static str {
        "JPN"
    }

    fn document(&self) -> &'static str {
        "My Number"
    }

    fn normalize(&self, raw: &str) -> String {
        compact(raw, false)
    }

    fn decode(&self, id: &str) -> Result<Evidence, Problem> {
        let d = exact_digits(id, 12)?;
        let expected = check_digit(&d[..11]);
        if d[11] != expected {
            return Err(Problem::CheckDigit(format!(
                "expected {expected}, found {}",
                d[11]
            )));
        }
        Ok(evidence(self.document()))
    }

    /// Eleven random digits and the check digit. No range is reserved for fiction, so a
    /// generated number may coincide with an issued one.
    fn generate(&self, _subject: &Subject, rng: &mut StageRng) -> String {
        let mut d = random_digits(rng, 11);
        d.push(check_digit(&d));
        render(&d)
    }

    fn uncertainties(&self) -> &'static [&'static str] {
        &["No range is reserved for fiction, so generated numbers may coincide with issued ones."]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{self, substitutions, DIGITS};
    use super::*;

    const SPECIMEN: &str = "621498320257";

    #[test]
    fn reference_specimen_is_valid() {
        assert_eq!(SCHEME.normalize("6214 9832 0257"), SPECIMEN);
        let payload = checks::digits("62149832025").unwrap();
        assert_eq!(checks::weighted_sum(&payload, &WEIGHTS), 180);
        assert_eq!(SCHEME.decode(SPECIMEN), Ok(evidence("My Number")));
    }

    /// A payload change shifts the sum by wΔ with 2 ≤ w ≤ 7 and 1 ≤ |Δ| ≤ 9, never a multiple
    /// of the prime 11, so the remainder r always changes; but r = 0 and r = 1 both give check
    /// digit 0. A substitution is therefore undetectable exactly when it moves r between 0
    /// and 1 (possible only when the check digit is 0).
    fn undetectable(id: &str, pos: usize, new: char) -> bool {
        if pos == 11 {
            return false;
        }
        let d = checks::digits(id).unwrap();
        let mut m = d.clone();
        m[pos] = new.to_digit(10).unwrap();
        let r = |x: &[u32]| checks::weighted_sum(&x[..11], &WEIGHTS) % 11;
        r(&d) <= 1 && r(&m) <= 1
    }

    #[test]
    fn single_substitutions_are_rejected_except_remainder_0_1_swaps() {
        // The specimen's remainder is 4: every substitution is detected.
        for (i, c, m) in substitutions(SPECIMEN, DIGITS) {
            assert!(SCHEME.decode(&m).is_err(), "{c} at {i}");
        }
        // A number with remainder 1 is fooled exactly by changes that bring it to 0.
        let mut rng = crate::seeding::rng(1, "test", "jpn-subst");
        let mut swaps = 0;
        for _ in 0..200 {
            let s = testkit::subject(
                "A",
                "B",
                crate::identity::govid::Sex::Male,
                (1980, 1, 1),
                "JPN",
                None,
            );
            let id = SCHEME.generate(&s, &mut rng);
            for (i, c, m) in substitutions(&id, DIGITS) {
                let ok = SCHEME.decode(&m).is_ok();
                assert_eq!(ok, undetectable(&id, i, c), "{id}: {c} at {i}");
                swaps += ok as usize;
            }
        }
        assert!(
            swaps > 0,
            "the remainder 0/1 collision should occur among 200 numbers"
        );
    }

    #[test]
    fn rejects_malformed_input() {
        assert!(matches!(
            SCHEME.decode("621498320258"),
            Err(Problem::CheckDigit(_))
        ));
        for bad in [
            "62149832025",
            "6214983202570",
            "62149832025X",
            "6214 9832 0257",
        ] {
            assert!(
                matches!(SCHEME.decode(bad), Err(Problem::Syntax(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn generated_numbers_are_valid() {
        let mut rng = crate::seeding::rng(1, "test", "jpn");
        for s in testkit::subjects("JPN", &["40", "13"]) {
            for _ in 0..20 {
                let id = SCHEME.generate(&s, &mut rng);
                assert_eq!(SCHEME.decode(&id), Ok(evidence("My Number")), "{id}");
            }
        }
    }
}
