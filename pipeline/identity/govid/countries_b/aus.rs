//! Australia: Tax File Number (TFN), 9 digits (some old ones 8) with a weighted mod-11 check.
//! It encodes nothing about its holder.

use super::super::{checks, Evidence, Problem, Scheme, Subject};
use super::compact;
use crate::seeding::StageRng;
use rand::Rng;

pub struct Tfn;

pub static SCHEME: Tfn = Tfn;

/// Weights of a 9-digit TFN; valid when the weighted sum is a multiple of 11.
const WEIGHTS_9: [u32; 9] = [1, 4, 3, 7, 5, 8, 6, 9, 10];

/// The two weightings in use for 8-digit TFNs (they differ in the last weight).
const WEIGHTS_8: [[u32; 8]; 2] = [[1, 4, 3, 7, 5, 8, 6, 9], [1, 4, 3, 7, 5, 8, 6, 10]];

/// Official "no TFN" codes used on payment summaries; never a real TFN.
const PLACEHOLDERS: [&str; 4] = ["000000000", "111111111", "333333333", "444444444"];

impl Scheme for Tfn {
    fn iso3(&self) -> &'static str {
        "AUS"
    }

    fn document(&self) -> &'static str {
        "TFN"
    }

    fn normalize(&self, raw: &str) -> String {
        compact(raw, false)
    }

    fn decode(&self, id: &str) -> Result<Evidence, Problem> {
        let d = checks::digits(id).ok_or_else(|| Problem::Syntax("expected digits only".into()))?;
        match d.len() {
            9 => {
                if PLACEHOLDERS.contains(&id) {
                    return Err(Problem::Impossible(format!("{id} is a \"no TFN\" code")));
                }
                if checks::weighted_sum(&d, &WEIGHTS_9) % 11 != 0 {
                    return Err(Problem::CheckDigit(
                        "weighted sum is not a multiple of 11".into(),
                    ));
                }
            }
            8 => {
                // Which last weight (9 or 10) applies is disputed: either is accepted.
                if !WEIGHTS_8
                    .iter()
                    .any(|w| checks::weighted_sum(&d, w) % 11 == 0)
                {
                    return Err(Problem::CheckDigit(
                        "weighted sum is not a multiple of 11 under either 8-digit weighting"
                            .into(),
                    ));
                }
            }
            n => return Err(Problem::Syntax(format!("expected 8 or 9 digits, got {n}"))),
        }
        Ok(Evidence {
            document: self.document().into(),
            ..Evidence::default()
        })
    }

    fn generate(&self, _subject: &Subject, rng: &mut StageRng) -> String {
        // Nine digits: eight from the rng, the ninth solving the weighted sum ≡ 0 (mod 11).
        // With last weight 10 ≡ −1, that digit is the sum of the first eight mod 11; when that
        // is 10 the eight digits are drawn again.
        loop {
            let mut d: Vec<u32> = (0..8).map(|_| rng.random_range(0..10)).collect();
            let last = checks::weighted_sum(&d, &WEIGHTS_9[..8]) % 11;
            if last == 10 {
                continue;
            }
            d.push(last);
            let s: String = d.iter().map(|&x| char::from(b'0' + x as u8)).collect();
            if !PLACEHOLDERS.contains(&s.as_str()) {
                return s;
            }
        }
    }

    fn uncertainties(&self) -> &'static [&'static str] {
        &[
            "8-digit TFNs: the last weight (9 or 10) is disputed, so a number passing either \
             weighting is accepted; this lets some single-digit errors in 8-digit TFNs through. \
             Only 9-digit TFNs are generated.",
            "The ATO's reserved values are \"no TFN\" codes that fail or bypass the checksum, so \
             checksum-valid generated TFNs can coincide with real ones.",
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{digit_substitutions, rng, subject};
    use super::*;
    use crate::identity::govid::Sex;

    #[test]
    fn worked_examples() {
        assert_eq!(SCHEME.normalize("123 456 782"), "123456782");
        assert_eq!(
            checks::weighted_sum(&checks::digits("123456782").unwrap(), &WEIGHTS_9),
            253
        );
        let ev = SCHEME.decode("123456782").unwrap();
        assert_eq!(
            ev,
            Evidence {
                document: "TFN".into(),
                ..Evidence::default()
            }
        );
        // Valid under the first 8-digit weighting only; accepted.
        let d = checks::digits("87650006").unwrap();
        assert_eq!(checks::weighted_sum(&d, &WEIGHTS_8[0]) % 11, 0);
        assert_ne!(checks::weighted_sum(&d, &WEIGHTS_8[1]) % 11, 0);
        assert!(SCHEME.decode("87650006").is_ok());
    }

    #[test]
    fn every_substitution_of_a_nine_digit_tfn_is_rejected() {
        // Each weight is 1..10, invertible mod 11, so w·δ ≢ 0 (mod 11) for 0 < |δ| < 10.
        for spec in ["123456782", "876543210"] {
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
    fn eight_digit_substitutions_caught_except_the_other_weighting_matches() {
        // 87650006 sums to 143 ≡ 0 under the first weighting and 149 ≡ 6 (mod 11) under the
        // second. A change δ at position i < 7 adds w_i·δ to both sums, so it breaks the first
        // but satisfies the second when w_i·δ ≡ 5 (mod 11); at the last position it adds 9δ
        // and 10δ ≡ −δ, satisfying the second when δ ≡ 6, i.e. δ = −5. Accepting either
        // weighting therefore lets exactly these changes through (position 6 would need
        // δ ≡ −1 on a 0).
        let accepted: Vec<(usize, char)> = digit_substitutions("87650006")
            .into_iter()
            .filter(|(_, _, m)| SCHEME.decode(m).is_ok())
            .map(|(i, v, _)| (i, v))
            .collect();
        let expected = vec![
            (0, '2'),
            (1, '0'),
            (2, '4'),
            (3, '1'),
            (4, '1'),
            (5, '2'),
            (7, '1'),
        ];
        assert_eq!(accepted, expected);
        for (i, v) in expected {
            let mut d = checks::digits("87650006").unwrap();
            d[i] = v.to_digit(10).unwrap();
            assert_ne!(checks::weighted_sum(&d, &WEIGHTS_8[0]) % 11, 0);
            assert_eq!(checks::weighted_sum(&d, &WEIGHTS_8[1]) % 11, 0);
        }
    }

    #[test]
    fn malformed_numbers_are_rejected() {
        for id in ["1234567", "1234567821", "12345678A", "123 456 782", ""] {
            assert!(matches!(SCHEME.decode(id), Err(Problem::Syntax(_))), "{id}");
        }
        for id in PLACEHOLDERS {
            assert!(
                matches!(SCHEME.decode(id), Err(Problem::Impossible(_))),
                "{id}"
            );
        }
        assert!(matches!(
            SCHEME.decode("987654321"),
            Err(Problem::CheckDigit(_))
        ));
        assert!(matches!(
            SCHEME.decode("123456783"),
            Err(Problem::CheckDigit(_))
        ));
    }

    #[test]
    fn generated_numbers_are_valid() {
        let s = subject(Sex::Female, (1990, 9, 9), "AUS", Some("02"));
        let mut r = rng("aus");
        for _ in 0..500 {
            let id = SCHEME.generate(&s, &mut r);
            assert_eq!(id.len(), 9);
            assert!(SCHEME.decode(&id).is_ok(), "{id}");
        }
    }
}
