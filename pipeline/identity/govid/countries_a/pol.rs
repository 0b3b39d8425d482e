//! Poland: PESEL, 11 digits: birth date `YYMMDD` with the century added to the month
//! (1800s +80, 1900s +0, 2000s +20, 2100s +40, 2200s +60), a 3-digit serial, a sex digit (odd
//! male, even female) and a check digit (weights 1 3 7 9 1 3 7 9 1 3, mod 10).

use super::{compact, evidence, exact_digits, number, random_digits, render};
use crate::identity::govid::checks;
use crate::identity::govid::{Date, Evidence, Problem, Scheme, Sex, Subject};
use crate::seeding::StageRng;
use rand::Rng;

pub struct Pesel;

pub static SCHEME: Pesel = Pesel;

const WEIGHTS: [u32; 10] = [1, 3, 7, 9, 1, 3, 7, 9, 1, 3];

fn check_digit(payload: &[u32]) -> u32 {
    (10 - checks::weighted_sum(payload, &WEIGHTS) % 10) % 10
}

/// (first year of the century, month offset) for every encodable century.
const CENTURIES: [(i32, u32); 5] = [(1800, 80), (1900, 0), (2000, 20), (2100, 40), (2200, 60)];

impl Scheme for Pesel {
    fn iso3(&self) -> &'static str {
        "POL"
    }

    fn document(&self) -> &'static str {
        "PESEL"
    }

    fn normalize(&self, raw: &str) -> String {
        compact(raw, false)
    }

    fn decode(&self, id: &str) -> Result<Evidence, Problem> {
        let d = exact_digits(id, 11)?;
        let expected = check_digit(&d[..10]);
        if d[10] != expected {
            return Err(Problem::CheckDigit(format!(
                "expected {expected}, found {}",
                d[10]
            )));
        }
        let coded_month = number(&d[2..4]);
        let (century, offset) = CENTURIES
            .iter()
            .copied()
            .find(|&(_, off)| (off + 1..=off + 12).contains(&coded_month))
            .ok_or_else(|| Problem::InvalidDate(format!("month code {coded_month:02}")))?;
        let year = century + number(&d[0..2]) as i32;
        let birth = Date::new(year, coded_month - offset, number(&d[4..6]))
            .ok_or_else(|| Problem::InvalidDate(id[..6].to_string()))?;
        let mut ev = evidence(self.document());
        ev.birth_date = Some(birth);
        ev.sex = Some(if d[9] % 2 == 1 {
            Sex::Male
        } else {
            Sex::Female
        });
        Ok(ev)
    }

    /// Birth date and sex from the subject, three random serial digits, a random sex digit
    /// of the right parity. No range is reserved for fiction, so a generated number may
    /// coincide with an issued one. Only births in 1800-2299 can be encoded; other years
    /// are folded into that range.
    fn generate(&self, subject: &Subject, rng: &mut StageRng) -> String {
        let b = subject.birth_date;
        let year = b.year.clamp(1800, 2299);
        let offset = CENTURIES
            .iter()
            .find(|(c, _)| (*c..*c + 100).contains(&year))
            .map(|&(_, off)| off)
            .expect("clamped year has a century");
        let mut d = render_two(year.rem_euclid(100) as u32);
        d.extend(render_two(b.month + offset));
        d.extend(render_two(b.day));
        d.extend(random_digits(rng, 3));
        let parity = match subject.sex {
            Sex::Male => 1,
            Sex::Female => 0,
        };
        d.push(2 * rng.random_range(0..5u32) + parity);
        d.push(check_digit(&d));
        render(&d)
    }

    fn uncertainties(&self) -> &'static [&'static str] {
        &["No range is reserved for fiction, so generated numbers may coincide with issued ones."]
    }
}

fn render_two(n: u32) -> Vec<u32> {
    vec![n / 10, n % 10]
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{self, substitutions, DIGITS};
    use super::*;

    fn with_check(payload: &str) -> String {
        let d = checks::digits(payload).unwrap();
        format!("{payload}{}", check_digit(&d))
    }

    #[test]
    fn reference_specimens_decode() {
        let payload = checks::digits("4405140135").unwrap();
        assert_eq!(checks::weighted_sum(&payload, &WEIGHTS), 101);
        let ev = SCHEME.decode("44051401359").unwrap();
        assert_eq!(ev.birth_date, Date::new(1944, 5, 14));
        assert_eq!(ev.sex, Some(Sex::Male));
        let ev = SCHEME.decode("02211307589").unwrap();
        assert_eq!(ev.birth_date, Date::new(2002, 1, 13));
        assert_eq!(ev.sex, Some(Sex::Female));
    }

    #[test]
    fn every_single_substitution_is_rejected() {
        let mut rng = crate::seeding::rng(1, "test", "pol-subst");
        let mut ids = vec!["44051401359".to_string(), "02211307589".to_string()];
        for s in testkit::subjects("POL", &[]) {
            ids.push(SCHEME.generate(&s, &mut rng));
        }
        for id in &ids {
            for (i, c, m) in substitutions(id, DIGITS) {
                assert!(SCHEME.decode(&m).is_err(), "{id}: {c} at {i} accepted");
            }
        }
    }

    #[test]
    fn every_century_and_sex_decode() {
        let cases = [
            ("9992310000", (1899, 12, 31), Sex::Female),
            ("0001010001", (1900, 1, 1), Sex::Male),
            ("0022290002", (2000, 2, 29), Sex::Female),
            ("9952310003", (2199, 12, 31), Sex::Male),
            ("0061010008", (2200, 1, 1), Sex::Female),
        ];
        for (payload, (y, m, d), sex) in cases {
            let ev = SCHEME.decode(&with_check(payload)).unwrap();
            assert_eq!(ev.birth_date, Date::new(y, m, d), "{payload}");
            assert_eq!(ev.sex, Some(sex), "{payload}");
        }
    }

    #[test]
    fn rejects_invalid_dates_and_malformed_input() {
        for payload in [
            "0013010001",
            "0000010001",
            "0102290001",
            "0073010001",
            "0004310001",
            "0001000001",
        ] {
            let id = with_check(payload);
            assert!(
                matches!(SCHEME.decode(&id), Err(Problem::InvalidDate(_))),
                "{id}"
            );
        }
        assert!(matches!(
            SCHEME.decode("44051401358"),
            Err(Problem::CheckDigit(_))
        ));
        for bad in ["4405140135", "440514013590", "4405140135X"] {
            assert!(
                matches!(SCHEME.decode(bad), Err(Problem::Syntax(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn generated_numbers_agree_with_the_subject() {
        let mut rng = crate::seeding::rng(1, "test", "pol");
        for s in testkit::subjects("POL", &["78", "77", "83"]) {
            for _ in 0..5 {
                let id = SCHEME.generate(&s, &mut rng);
                let ev = SCHEME.decode(&id).unwrap();
                assert_eq!(ev.birth_date, Some(s.birth_date), "{id}");
                assert_eq!(ev.sex, Some(s.sex), "{id}");
            }
        }
    }
}
