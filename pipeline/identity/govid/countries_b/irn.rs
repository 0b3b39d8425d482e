//! Iran: national code (کد ملی, Kod-e Melli), 10 digits: the code of the town where the
//! birth certificate was issued (3), a personal serial (6) and a weighted mod-11 check digit.

use super::super::{checks, Evidence, Problem, Scheme, Subject};
use super::{compact, exact_digits};
use crate::seeding::StageRng;
use rand::Rng;

pub struct KodMelli;

pub static SCHEME: KodMelli = KodMelli;

const WEIGHTS: [u32; 9] = [10, 9, 8, 7, 6, 5, 4, 3, 2];

/// Check digit of the first nine digits: the remainder r of the weighted sum mod 11 if r < 2,
/// else 11 − r.
pub fn check_digit(payload: &[u32]) -> u32 {
    let r = checks::weighted_sum(payload, &WEIGHTS) % 11;
    if r < 2 {
        r
    } else {
        11 - r
    }
}

impl Scheme for KodMelli {
    fn iso3(&self) -> &'static str {
        "IRN"
    }

    fn document(&self) -> &'static str {
        "Kod-e Melli"
    }

    /// Also restores leading zeros that some systems drop: 8 or 9 digits are left-padded to 10.
    fn normalize(&self, raw: &str) -> String {
        let c = compact(raw, true);
        if (8..=9).contains(&c.len()) && c.bytes().all(|b| b.is_ascii_digit()) {
            format!("{c:0>10}")
        } else {
            c
        }
    }

    fn decode(&self, id: &str) -> Result<Evidence, Problem> {
        let d = exact_digits(id, 10)?;
        if d.iter().all(|&x| x == d[0]) {
            return Err(Problem::Impossible("a single repeated digit".into()));
        }
        let expected = check_digit(&d[..9]);
        if d[9] != expected {
            return Err(Problem::CheckDigit(format!(
                "expected {expected}, found {}",
                d[9]
            )));
        }
        Ok(Evidence {
            document: self.document().into(),
            region: Some(id[0..3].to_string()),
            ..Evidence::default()
        })
    }

    fn generate(&self, _subject: &Subject, rng: &mut StageRng) -> String {
        // Town codes are not tabulated, so the first three digits come from the rng, like the
        // serial; the place of birth is not reflected.
        loop {
            let mut d: Vec<u32> = (0..9).map(|_| rng.random_range(0..10)).collect();
            d.push(check_digit(&d));
            if d.iter().any(|&x| x != d[0]) {
                return d.iter().map(|&x| char::from(b'0' + x as u8)).collect();
            }
        }
    }

    fn uncertainties(&self) -> &'static [&'static str] {
        &[
            "Town codes (digits 1-3) are neither checked nor derived from the place of birth: \
             no table is shipped, and generated codes are drawn from the rng.",
            "No reserved range exists: a generated number can coincide with a real one.",
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{digit_substitutions, rng, subject};
    use super::*;
    use crate::identity::govid::Sex;

    #[test]
    fn worked_example_is_accepted() {
        let p = checks::digits("093283381").unwrap();
        assert_eq!(checks::weighted_sum(&p, &WEIGHTS), 220);
        assert_eq!(check_digit(&p), 0);
        let ev = SCHEME.decode("0932833810").unwrap();
        assert_eq!(ev.document, "Kod-e Melli");
        assert_eq!(ev.region.as_deref(), Some("093"));
        assert_eq!(ev.birth_date, None);
        assert_eq!(ev.sex, None);
    }

    #[test]
    fn normalisation_maps_persian_digits_and_restores_leading_zeros() {
        assert_eq!(SCHEME.normalize("۰۹۳-۲۸۳۳۸۱-۰"), "0932833810");
        assert_eq!(SCHEME.normalize("٠٩٣٢٨٣٣٨١٠"), "0932833810");
        assert_eq!(SCHEME.normalize("932833810"), "0932833810");
        assert_eq!(SCHEME.normalize("12345678"), "0012345678");
        assert_eq!(SCHEME.normalize("1234567"), "1234567");
        assert!(SCHEME.decode(&SCHEME.normalize("932-833810")).is_ok());
    }

    #[test]
    fn every_substitution_of_the_worked_example_is_rejected() {
        for (i, v, m) in digit_substitutions("0932833810") {
            assert!(
                SCHEME.decode(&m).is_err(),
                "{m} (position {i} -> {v}) accepted"
            );
        }
    }

    #[test]
    fn only_the_residue_1_and_10_collisions_go_undetected() {
        // Remainders 1 and 10 both give check digit 1 (r, and 11 − r). The weights 10..2 are
        // invertible mod 11, so a single change of digit i by δ moves the sum by w_i·δ ≢ 0:
        // it goes unseen only when it moves the remainder between 1 and 10, i.e. for the one δ
        // with w_i·δ ≡ 2 (mod 11) from remainder 10, when the new digit exists.
        let spec = "0932833071";
        let p = checks::digits(&spec[..9]).unwrap();
        assert_eq!(checks::weighted_sum(&p, &WEIGHTS) % 11, 10);
        let accepted: Vec<(usize, char)> = digit_substitutions(spec)
            .into_iter()
            .filter(|(_, _, m)| SCHEME.decode(m).is_ok())
            .map(|(i, v, _)| (i, v))
            .collect();
        // Position 5 (weight 5) would need δ = 7 on a 3.
        let expected = vec![
            (0, '9'),
            (1, '8'),
            (2, '6'),
            (3, '7'),
            (4, '1'),
            (6, '9'),
            (7, '8'),
            (8, '8'),
        ];
        assert_eq!(accepted, expected);
        for (i, v) in expected {
            let mut m: Vec<u32> = p.clone();
            m[i] = v.to_digit(10).unwrap();
            assert_eq!(checks::weighted_sum(&m, &WEIGHTS) % 11, 1);
        }
    }

    #[test]
    fn malformed_numbers_are_rejected() {
        for id in ["093283381", "09328338100", "093283381X", "093-283381-0"] {
            assert!(matches!(SCHEME.decode(id), Err(Problem::Syntax(_))), "{id}");
        }
        // Repeated digits pass the checksum but are rejected.
        for x in '0'..='9' {
            let id: String = std::iter::repeat_n(x, 10).collect();
            let d = checks::digits(&id).unwrap();
            assert_eq!(check_digit(&d[..9]), d[9]);
            assert!(
                matches!(SCHEME.decode(&id), Err(Problem::Impossible(_))),
                "{id}"
            );
        }
        assert!(matches!(
            SCHEME.decode("0932833811"),
            Err(Problem::CheckDigit(_))
        ));
    }

    #[test]
    fn generated_numbers_are_valid() {
        let s = subject(Sex::Female, (1970, 1, 1), "IRN", Some("26"));
        let mut r = rng("irn");
        for _ in 0..500 {
            let id = SCHEME.generate(&s, &mut r);
            let ev = SCHEME.decode(&id).unwrap_or_else(|e| panic!("{id}: {e}"));
            assert_eq!(ev.region.as_deref(), Some(&id[..3]));
        }
    }
}
