//! Canada: Social Insurance Number (SIN), 9 digits written `123-456-782`, Luhn-checked.
//! The first digit is the province or status of registration: 1 NB NL NS PE, 2-3 QC, 4-5 ON,
//! 6 MB SK AB NT NU, 7 BC YT, 9 temporary resident; 0 and 8 are not assigned to individuals.

use super::{compact, evidence, exact_digits, pick, random_digits, render};
use crate::identity::govid::checks;
use crate::identity::govid::{Evidence, Problem, Scheme, Subject};
use crate::seeding::StageRng;

pub struct Sin;

pub static SCHEME: Sin = Sin;

/// GeoNames admin1 code of a province or territory → the first digits it registers under.
const DIGITS_BY_ADMIN1: [(&str, &[u32]); 13] = [
    ("01", &[6]),    // Alberta
    ("02", &[7]),    // British Columbia
    ("03", &[6]),    // Manitoba
    ("04", &[1]),    // New Brunswick
    ("05", &[1]),    // Newfoundland and Labrador
    ("07", &[1]),    // Nova Scotia
    ("08", &[4, 5]), // Ontario
    ("09", &[1]),    // Prince Edward Island
    ("10", &[2, 3]), // Quebec
    ("11", &[6]),    // Saskatchewan
    ("12", &[7]),    // Yukon
    ("13", &[6]),    // Northwest Territories
    ("14", &[6]),    // Nunavut
];

const ASSIGNED_FIRST: [u32; 8] = [1, 2, 3, 4, 5, 6, 7, 9];

/// First digits consistent with a GeoNames admin1 code of Canada.
pub fn first_digits_for_admin1(admin1: &str) -> Option<&'static [u32]> {
    DIGITS_BY_ADMIN1
        .iter()
        .find(|(a, _)| *a == admin1)
        .map(|(_, d)| *d)
}

impl Scheme for Sin {
    fn iso3(&self) -> &'static str {
        "CAN"
    }

    fn document(&self) -> &'static str {
        "SIN"
    }

    fn normalize(&self, raw: &str) -> String {
        compact(raw, false)
    }

    fn decode(&self, id: &str) -> Result<Evidence, Problem> {
        let d = exact_digits(id, 9)?;
        if !checks::luhn_valid(&d) {
            return Err(Problem::CheckDigit("Luhn check failed".into()));
        }
        if d[0] == 0 || d[0] == 8 {
            return Err(Problem::Impossible(format!(
                "first digit {} is not assigned to individuals",
                d[0]
            )));
        }
        let mut ev = evidence(self.document());
        ev.region = Some(d[0].to_string());
        Ok(ev)
    }

    /// First digit: the birth province's when the subject was born in Canada in a known
    /// province (registration usually happens there), otherwise any assigned digit drawn
    /// from the rng (immigrants register wherever they settle, or as temporary residents).
    /// Seven random digits and the Luhn digit follow. The fictitious first digit 0 fails
    /// validation and no range is reserved among valid ones, so a generated number may
    /// coincide with an issued one.
    fn generate(&self, subject: &Subject, rng: &mut StageRng) -> String {
        let choices = subject
            .birth_admin1
            .filter(|_| subject.birth_country_iso3 == "CAN")
            .and_then(first_digits_for_admin1)
            .unwrap_or(&ASSIGNED_FIRST);
        let mut d = vec![*pick(rng, choices)];
        d.extend(random_digits(rng, 7));
        d.push(checks::luhn_digit(&d));
        render(&d)
    }

    fn uncertainties(&self) -> &'static [&'static str] {
        &[
            "The first digit records the province of registration, not of birth; generation uses the birth province as the likely registration province.",
            "No valid range is reserved for fiction (first digit 0 is, but fails validation), so generated numbers may coincide with issued ones.",
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{self, substitutions, DIGITS};
    use super::*;

    #[test]
    fn reference_example_is_luhn_valid_but_never_assigned() {
        assert_eq!(SCHEME.normalize("046 454 286"), "046454286");
        assert_eq!(checks::luhn_digit(&checks::digits("04645428").unwrap()), 6);
        assert!(matches!(
            SCHEME.decode("046454286"),
            Err(Problem::Impossible(_))
        ));
    }

    #[test]
    fn valid_numbers_decode_their_region() {
        assert_eq!(SCHEME.normalize("123-456-782"), "123456782");
        let ev = SCHEME.decode("123456782").unwrap();
        assert_eq!(ev.region.as_deref(), Some("1"));
        for first in ASSIGNED_FIRST {
            let mut d = vec![first, 4, 6, 4, 5, 4, 2, 8];
            d.push(checks::luhn_digit(&d));
            let ev = SCHEME.decode(&render(&d)).unwrap();
            assert_eq!(ev.region, Some(first.to_string()));
        }
    }

    #[test]
    fn every_single_substitution_is_rejected() {
        let mut rng = crate::seeding::rng(1, "test", "can-subst");
        let mut ids = vec!["123456782".to_string()];
        for s in testkit::subjects("CAN", &["08", "10"]) {
            ids.push(SCHEME.generate(&s, &mut rng));
        }
        for id in &ids {
            for (i, c, m) in substitutions(id, DIGITS) {
                assert!(SCHEME.decode(&m).is_err(), "{id}: {c} at {i} accepted");
            }
        }
    }

    #[test]
    fn rejects_malformed_input() {
        assert!(matches!(
            SCHEME.decode("123456783"),
            Err(Problem::CheckDigit(_))
        ));
        let mut d = vec![8, 4, 6, 4, 5, 4, 2, 8];
        d.push(checks::luhn_digit(&d));
        assert!(matches!(
            SCHEME.decode(&render(&d)),
            Err(Problem::Impossible(_))
        ));
        for bad in ["12345678", "1234567820", "12345678A", "123-456-782"] {
            assert!(
                matches!(SCHEME.decode(bad), Err(Problem::Syntax(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn generated_numbers_carry_the_birth_province() {
        let mut rng = crate::seeding::rng(1, "test", "can");
        let admin1: Vec<&str> = DIGITS_BY_ADMIN1.iter().map(|(a, _)| *a).collect();
        for s in testkit::subjects("CAN", &admin1) {
            for _ in 0..5 {
                let id = SCHEME.generate(&s, &mut rng);
                let ev = SCHEME.decode(&id).unwrap();
                let first: u32 = ev.region.unwrap().parse().unwrap();
                match s.birth_admin1 {
                    Some(a) => assert!(first_digits_for_admin1(a).unwrap().contains(&first)),
                    None => assert!(ASSIGNED_FIRST.contains(&first)),
                }
            }
        }
    }
}
