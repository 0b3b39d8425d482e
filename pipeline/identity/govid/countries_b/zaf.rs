//! South Africa: identity number, 13 digits `YYMMDD SSSS C A Z`.
//!
//! Birth date (two-digit year), a sequence whose value gives the sex (0000-4999 female,
//! 5000-9999 male), citizenship (0 citizen, 1 permanent resident), a digit without meaning
//! today (normally 8) and a Luhn check digit over all thirteen digits.

use super::super::{checks, Evidence, Problem, Scheme, Sex, Subject};
use super::{compact, exact_digits, number, two_digit_year_date};
use crate::seeding::StageRng;
use rand::Rng;

pub struct IdNumber;

pub static SCHEME: IdNumber = IdNumber;

impl Scheme for IdNumber {
    fn iso3(&self) -> &'static str {
        "ZAF"
    }

    fn document(&self) -> &'static str {
        "ID number"
    }

    fn normalize(&self, raw: &str) -> String {
        compact(raw, false)
    }

    fn decode(&self, id: &str) -> Result<Evidence, Problem> {
        let d = exact_digits(id, 13)?;
        // Two-digit year: the latest century that does not put the date in the future.
        let date = two_digit_year_date(number(&d[0..2]), number(&d[2..4]), number(&d[4..6]))?;
        // 0 citizen, 1 permanent resident; 2 is reported for refugees by some newer sources
        // only, so it is neither confirmed nor rejected.
        if d[10] > 2 {
            return Err(Problem::Impossible(format!("citizenship digit {}", d[10])));
        }
        if !checks::luhn_valid(&d) {
            return Err(Problem::CheckDigit(format!(
                "expected {}, found {}",
                checks::luhn_digit(&d[..12]),
                d[12]
            )));
        }
        let sex = if number(&d[6..10]) >= 5000 {
            Sex::Male
        } else {
            Sex::Female
        };
        Ok(Evidence {
            document: self.document().into(),
            birth_date: Some(date),
            sex: Some(sex),
            ..Evidence::default()
        })
    }

    fn generate(&self, subject: &Subject, rng: &mut StageRng) -> String {
        // The date is written with its two-digit year: holders aged 100 or more would decode
        // a century late, which the scheme cannot avoid. Citizenship 0 and A = 8, today's
        // usual value.
        let b = subject.birth_date;
        let sequence: u32 = match subject.sex {
            Sex::Female => rng.random_range(0..5000),
            Sex::Male => rng.random_range(5000..10000),
        };
        let body = format!(
            "{:02}{:02}{:02}{sequence:04}08",
            b.year.rem_euclid(100),
            b.month,
            b.day
        );
        let check = checks::luhn_digit(&checks::digits(&body).expect("digits"));
        format!("{body}{check}")
    }

    fn uncertainties(&self) -> &'static [&'static str] {
        &[
            "Citizenship digit 2 (reported for refugees by some newer sources) is accepted; \
             3-9 are rejected. Generated numbers use 0.",
            "The year has two digits: the latest century not after the as-of date (2026-12-31) \
             is taken, so holders aged 100 or more decode a century late.",
            "No reserved range exists: a generated number can coincide with a real one.",
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{digit_substitutions, rng, subject};
    use super::*;
    use crate::identity::govid::Date;

    #[test]
    fn reference_examples_decode() {
        assert_eq!(
            checks::luhn_digit(&checks::digits("750330504408").unwrap()),
            9
        );
        assert_eq!(SCHEME.normalize("750330 5044 08 9"), "7503305044089");
        let ev = SCHEME.decode("7503305044089").unwrap();
        assert_eq!(ev.document, "ID number");
        assert_eq!(ev.birth_date, Date::new(1975, 3, 30));
        assert_eq!(ev.sex, Some(Sex::Male));
        let ev = SCHEME.decode("8801235111088").unwrap();
        assert_eq!(ev.birth_date, Date::new(1988, 1, 23));
        assert_eq!(ev.sex, Some(Sex::Male));
    }

    #[test]
    fn every_substitution_is_rejected() {
        // Luhn catches every single-digit change: doubling-and-folding permutes 0-9, so a
        // changed digit always changes the sum mod 10.
        for spec in ["7503305044089", "8801235111088"] {
            for (i, v, m) in digit_substitutions(spec) {
                assert!(
                    SCHEME.decode(&m).is_err(),
                    "{m} (position {i} -> {v}) accepted"
                );
            }
        }
    }

    #[test]
    fn birth_date_century_and_sex() {
        let with_check = |body: &str| {
            format!(
                "{body}{}",
                checks::luhn_digit(&checks::digits(body).unwrap())
            )
        };
        let cases = [
            ("000229499908", Date::new(2000, 2, 29), Sex::Female),
            ("050101000008", Date::new(2005, 1, 1), Sex::Female),
            ("261231500018", Date::new(2026, 12, 31), Sex::Male),
            ("270101999908", Date::new(1927, 1, 1), Sex::Male),
            ("451117499918", Date::new(1945, 11, 17), Sex::Female),
            ("991231500028", Date::new(1999, 12, 31), Sex::Male),
        ];
        for (body, date, sex) in cases {
            let id = with_check(body);
            let ev = SCHEME.decode(&id).unwrap_or_else(|e| panic!("{id}: {e}"));
            assert_eq!(ev.birth_date, date, "{id}");
            assert_eq!(ev.sex, Some(sex), "{id}");
        }
    }

    #[test]
    fn malformed_numbers_are_rejected() {
        let with_check = |body: &str| {
            format!(
                "{body}{}",
                checks::luhn_digit(&checks::digits(body).unwrap())
            )
        };
        for id in [
            "750330504408",
            "75033050440890",
            "75033050440X9",
            "750330 5044089",
        ] {
            assert!(matches!(SCHEME.decode(id), Err(Problem::Syntax(_))), "{id}");
        }
        // Month 13, day 00, 31 April, 29 February 2001 / 1901.
        for body in [
            "751330504408",
            "750300504408",
            "750431504408",
            "010229504408",
        ] {
            let id = with_check(body);
            assert!(
                matches!(SCHEME.decode(&id), Err(Problem::InvalidDate(_))),
                "{id}"
            );
        }
        for c in 3..10 {
            let id = with_check(&format!("7503305044{c}8"));
            assert!(
                matches!(SCHEME.decode(&id), Err(Problem::Impossible(_))),
                "{id}"
            );
        }
        assert!(matches!(
            SCHEME.decode("7503305044088"),
            Err(Problem::CheckDigit(_))
        ));
    }

    #[test]
    fn generated_numbers_decode_to_the_subject() {
        let subjects = [
            subject(Sex::Male, (1975, 3, 30), "ZAF", Some("06")),
            subject(Sex::Female, (1960, 2, 29), "ZAF", None),
            subject(Sex::Female, (2000, 2, 29), "ZAF", Some("02")),
            subject(Sex::Male, (2007, 10, 10), "ZWE", None),
            subject(Sex::Male, (1945, 1, 1), "ZAF", Some("03")),
        ];
        let mut r = rng("zaf");
        for s in &subjects {
            for _ in 0..50 {
                let id = SCHEME.generate(s, &mut r);
                let ev = SCHEME.decode(&id).unwrap_or_else(|e| panic!("{id}: {e}"));
                assert_eq!(ev.birth_date, Some(s.birth_date));
                assert_eq!(ev.sex, Some(s.sex));
                assert_eq!(&id[10..12], "08");
            }
        }
    }
}
