//! Brazil: CPF (Cadastro de Pessoas Físicas), 11 digits written `NNN.NNN.NNN-DD`.
//!
//! Nine base digits, the ninth being the fiscal region of first registration, then two mod-11
//! check digits. No birth date and no sex are encoded.

use super::{compact, evidence, exact_digits, pick, random_digits, render};
use crate::identity::govid::checks;
use crate::identity::govid::{Evidence, Problem, Scheme, Subject};
use crate::seeding::StageRng;

pub struct Cpf;

pub static SCHEME: Cpf = Cpf;

/// GeoNames admin1 code of a Brazilian state → fiscal-region digit of that state:
/// 1 DF GO MT MS TO, 2 PA AM AC AP RO RR, 3 CE MA PI, 4 PE RN PB AL, 5 BA SE, 6 MG,
/// 7 RJ ES, 8 SP, 9 PR SC, 0 RS.
const REGION_BY_ADMIN1: [(&str, u32); 27] = [
    ("01", 2), // Acre
    ("02", 4), // Alagoas
    ("03", 2), // Amapá
    ("04", 2), // Amazonas
    ("05", 5), // Bahia
    ("06", 3), // Ceará
    ("07", 1), // Distrito Federal
    ("08", 7), // Espírito Santo
    ("11", 1), // Mato Grosso do Sul
    ("13", 3), // Maranhão
    ("14", 1), // Mato Grosso
    ("15", 6), // Minas Gerais
    ("16", 2), // Pará
    ("17", 4), // Paraíba
    ("18", 9), // Paraná
    ("20", 3), // Piauí
    ("21", 7), // Rio de Janeiro
    ("22", 4), // Rio Grande do Norte
    ("23", 0), // Rio Grande do Sul
    ("24", 2), // Rondônia
    ("25", 2), // Roraima
    ("26", 9), // Santa Catarina
    ("27", 8), // São Paulo
    ("28", 5), // Sergipe
    ("29", 1), // Goiás
    ("30", 4), // Pernambuco
    ("31", 1), // Tocantins
];

/// Fiscal-region digit (as decoded into `region`) for a GeoNames admin1 code of Brazil.
pub fn region_for_admin1(admin1: &str) -> Option<u32> {
    REGION_BY_ADMIN1
        .iter()
        .find(|(a, _)| *a == admin1)
        .map(|&(_, r)| r)
}

/// 11 − (sum mod 11), with 10 and 11 written as 0.
fn mod11_digit(sum: u32) -> u32 {
    let r = sum % 11;
    if r < 2 {
        0
    } else {
        11 - r
    }
}

/// Both check digits for nine base digits.
fn check_digits(base: &[u32]) -> (u32, u32) {
    let first = mod11_digit(checks::weighted_sum(base, &[10, 9, 8, 7, 6, 5, 4, 3, 2]));
    let second =
        mod11_digit(checks::weighted_sum(base, &[11, 10, 9, 8, 7, 6, 5, 4, 3]) + 2 * first);
    (first, second)
}

impl Scheme for Cpf {
    fn iso3(&self) -> &'static str {
        "BRA"
    }

    fn document(&self) -> &'static str {
        "CPF"
    }

    fn normalize(&self, raw: &str) -> String {
        compact(raw, false)
    }

    fn decode(&self, id: &str) -> Result<Evidence, Problem> {
        let d = exact_digits(id, 11)?;
        let (first, second) = check_digits(&d[..9]);
        if (d[9], d[10]) != (first, second) {
            return Err(Problem::CheckDigit(format!(
                "expected {first}{second}, found {}{}",
                d[9], d[10]
            )));
        }
        if d.iter().all(|&x| x == d[0]) {
            return Err(Problem::Impossible(
                "a single repeated digit is not a registration".into(),
            ));
        }
        let mut ev = evidence(self.document());
        ev.region = Some(d[8].to_string());
        Ok(ev)
    }

    /// Eight random base digits, then the region digit: that of the birth state for subjects
    /// born in Brazil in a known state (the registration region is usually the home state),
    /// otherwise a region drawn from the rng. No range is reserved for fiction, so a
    /// generated number may coincide with an issued one.
    fn generate(&self, subject: &Subject, rng: &mut StageRng) -> String {
        let region = subject
            .birth_admin1
            .filter(|_| subject.birth_country_iso3 == "BRA")
            .and_then(region_for_admin1)
            .unwrap_or_else(|| *pick(rng, &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]));
        loop {
            let mut d = random_digits(rng, 8);
            d.push(region);
            if d.iter().all(|&x| x == region) {
                continue;
            }
            let (first, second) = check_digits(&d);
            d.push(first);
            d.push(second);
            return render(&d);
        }
    }

    fn uncertainties(&self) -> &'static [&'static str] {
        &[
            "The region-digit table is disputed by one low-quality source; the digit is decoded raw and only the majority table is used for generation.",
            "The region digit records the fiscal region of first registration, not the birth state; generation uses the birth state as the likely registration state.",
            "No range is reserved for fiction, so generated numbers may coincide with issued ones.",
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{self, substitutions, DIGITS};
    use super::*;

    const SPECIMEN: &str = "39053344705";

    #[test]
    fn reference_specimen_decodes() {
        assert_eq!(SCHEME.normalize("390.533.447-05"), SPECIMEN);
        assert_eq!(check_digits(&checks::digits("390533447").unwrap()), (0, 5));
        let ev = SCHEME.decode(SPECIMEN).unwrap();
        assert_eq!(ev.region.as_deref(), Some("7"));
        assert_eq!(ev.birth_date, None);
        assert_eq!(ev.sex, None);
    }

    /// Remainders mod 11 of the two check sums, computed from the base digits.
    fn remainders(base: &[u32]) -> (u32, u32) {
        let s1 = checks::weighted_sum(base, &[10, 9, 8, 7, 6, 5, 4, 3, 2]);
        let dv1 = mod11_digit(s1);
        let s2 = checks::weighted_sum(base, &[11, 10, 9, 8, 7, 6, 5, 4, 3]) + 2 * dv1;
        (s1 % 11, s2 % 11)
    }

    /// A change Δ to base digit i shifts the first sum by (10 − i)·Δ, never a multiple of 11,
    /// and the second by (11 − i)·Δ plus twice any change of the first check digit. Both
    /// check digits map remainders 0 and 1 to 0, and the second sum gives the first base
    /// digit weight 11 ≡ 0. So a substitution goes undetected exactly when, for each sum, the
    /// remainder is unchanged or moves within {0, 1}. A change to a check digit is always
    /// detected.
    fn undetectable(id: &str, pos: usize, new: char) -> bool {
        if pos >= 9 {
            return false;
        }
        let d = checks::digits(id).unwrap();
        let mut m = d.clone();
        m[pos] = new.to_digit(10).unwrap();
        let (a1, a2) = remainders(&d[..9]);
        let (b1, b2) = remainders(&m[..9]);
        let same = |a: u32, b: u32| a == b || (a < 2 && b < 2);
        same(a1, b1) && same(a2, b2)
    }

    #[test]
    fn single_substitutions_are_rejected_except_the_remainder_collisions() {
        // The specimen's first sum is 221 ≡ 1 and its second 259 ≡ 6. Raising the first digit
        // from 3 to 4 adds 10 to the first sum (231 ≡ 0, check digit still 0) and 11 to the
        // second (remainder unchanged): the only undetected substitution.
        let accepted: Vec<(usize, char)> = substitutions(SPECIMEN, DIGITS)
            .into_iter()
            .filter(|(_, _, m)| SCHEME.decode(m).is_ok())
            .map(|(i, c, _)| (i, c))
            .collect();
        assert_eq!(accepted, vec![(0, '4')]);

        let mut rng = crate::seeding::rng(1, "test", "bra-subst");
        for _ in 0..300 {
            let s = testkit::subject(
                "A",
                "B",
                crate::identity::govid::Sex::Male,
                (1980, 1, 1),
                "BRA",
                None,
            );
            let id = SCHEME.generate(&s, &mut rng);
            for (i, c, m) in substitutions(&id, DIGITS) {
                let ok = SCHEME.decode(&m).is_ok();
                let repeated = m.chars().all(|x| x == c);
                assert_eq!(ok, undetectable(&id, i, c) && !repeated, "{id}: {c} at {i}");
            }
        }
    }

    #[test]
    fn rejects_repeated_digits_and_malformed_input() {
        for x in 0..10 {
            let id: String = std::iter::repeat_n(char::from_digit(x, 10).unwrap(), 11).collect();
            assert!(
                matches!(SCHEME.decode(&id), Err(Problem::Impossible(_))),
                "{id}"
            );
        }
        assert!(matches!(
            SCHEME.decode("39053344706"),
            Err(Problem::CheckDigit(_))
        ));
        for bad in [
            "3905334470",
            "390533447051",
            "3905334470A",
            "390.533.447-05",
        ] {
            assert!(
                matches!(SCHEME.decode(bad), Err(Problem::Syntax(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn generated_numbers_carry_the_birth_region() {
        let mut rng = crate::seeding::rng(1, "test", "bra");
        let admin1: Vec<&str> = REGION_BY_ADMIN1.iter().map(|(a, _)| *a).collect();
        for s in testkit::subjects("BRA", &admin1) {
            let id = SCHEME.generate(&s, &mut rng);
            let ev = SCHEME.decode(&id).unwrap();
            if let Some(a) = s.birth_admin1 {
                let r = region_for_admin1(a).unwrap();
                assert_eq!(ev.region, Some(r.to_string()), "{id}");
            }
        }
        let sp = testkit::subject(
            "Ana",
            "Silva",
            crate::identity::govid::Sex::Female,
            (1990, 5, 6),
            "BRA",
            Some("27"),
        );
        let ev = SCHEME.decode(&SCHEME.generate(&sp, &mut rng)).unwrap();
        assert_eq!(ev.region.as_deref(), Some("8"));
    }
}
