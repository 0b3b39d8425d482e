//! South Korea: Resident Registration Number (주민등록번호), written `YYMMDD-SXXXXXX`.
//!
//! Digits 1-6 are the birth date, digit 7 the century and sex (and whether the holder is a
//! foreigner), digits 8-9 the region where the birth was registered, 10-11 the community
//! centre, 12 the order of registration that day and 13 a weighted mod-11 check digit.
//! Numbers assigned from 5 October 2020 on carry six random digits after digit 7 instead.

use super::super::{checks, Date, Evidence, Problem, Scheme, Sex, Subject};
use super::{calendar_date, compact, exact_digits, not_after_as_of, number, AS_OF};
use crate::seeding::StageRng;
use rand::Rng;

pub struct Rrn;

pub static SCHEME: Rrn = Rrn;

const WEIGHTS: [u32; 12] = [2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5];

/// Numbers dated from this month on may have been assigned under the October 2020 scheme,
/// whose last six digits are random: neither the region code nor the check digit is enforced.
const REFORM: Date = Date {
    year: 2020,
    month: 10,
    day: 1,
};

/// Highest region code in use (digits 8-9 of a pre-2020 number).
const MAX_REGION: u32 = 96;

/// Check digit of the first twelve digits.
pub fn check_digit(payload: &[u32]) -> u32 {
    (11 - checks::weighted_sum(payload, &WEIGHTS) % 11) % 10
}

/// Century, sex and foreigner flag of digit 7.
fn century_sex(d: u32) -> (i32, Sex, bool) {
    match d {
        9 => (1800, Sex::Male, false),
        0 => (1800, Sex::Female, false),
        1 => (1900, Sex::Male, false),
        2 => (1900, Sex::Female, false),
        3 => (2000, Sex::Male, false),
        4 => (2000, Sex::Female, false),
        5 => (1900, Sex::Male, true),
        6 => (1900, Sex::Female, true),
        7 => (2000, Sex::Male, true),
        _ => (2000, Sex::Female, true),
    }
}

/// Region codes of the admin1 units with documented ranges, keyed by GeoNames admin1 code.
pub fn region_range_of_admin1(admin1: &str) -> Option<std::ops::RangeInclusive<u32>> {
    match admin1 {
        "11" => Some(0..=8),  // Seoul
        "10" => Some(9..=12), // Busan
        _ => None,
    }
}

impl Scheme for Rrn {
    fn iso3(&self) -> &'static str {
        "KOR"
    }

    fn document(&self) -> &'static str {
        "RRN"
    }

    fn normalize(&self, raw: &str) -> String {
        compact(raw, false)
    }

    fn decode(&self, id: &str) -> Result<Evidence, Problem> {
        let d = exact_digits(id, 13)?;
        let (century, sex, foreigner) = century_sex(d[6]);
        let date = calendar_date(
            century + number(&d[0..2]) as i32,
            number(&d[2..4]),
            number(&d[4..6]),
        )?;
        let date = not_after_as_of(date)?;
        let mut ev = Evidence {
            document: self.document().into(),
            birth_date: Some(date),
            sex: Some(sex),
            ..Evidence::default()
        };
        if date >= REFORM {
            // Whether the last digit is still computed under the 2020 scheme is not known.
            return Ok(ev);
        }
        let region = number(&d[7..9]);
        if region > MAX_REGION {
            return Err(Problem::Impossible(format!(
                "region code {region:02} is above {MAX_REGION}"
            )));
        }
        let expected = check_digit(&d[..12]);
        if d[12] != expected {
            return Err(Problem::CheckDigit(format!(
                "expected {expected}, found {}",
                d[12]
            )));
        }
        if !foreigner {
            ev.region = Some(id[7..9].to_string());
        }
        Ok(ev)
    }

    fn generate(&self, subject: &Subject, rng: &mut StageRng) -> String {
        // Only 1800-01-01 ..= AS_OF can be written; other dates are clamped into that span.
        let b = encodable(subject.birth_date);
        let sex_digit = match (b.year / 100, subject.sex) {
            (18, Sex::Male) => 9,
            (18, Sex::Female) => 0,
            (19, Sex::Male) => 1,
            (19, Sex::Female) => 2,
            (_, Sex::Male) => 3,
            (_, Sex::Female) => 4,
        };
        // Always the pre-2020 layout (the documented safe rule): Seoul and Busan have
        // documented region ranges; other places in Korea get a code outside them, drawn from
        // the rng, and births abroad or of unknown place any code in use.
        let region = match (subject.birth_country_iso3, subject.birth_admin1) {
            ("KOR", Some(a1)) => match region_range_of_admin1(a1) {
                Some(r) => rng.random_range(r),
                None => rng.random_range(13..=MAX_REGION),
            },
            _ => rng.random_range(0..=MAX_REGION),
        };
        let mut payload: Vec<u32> = vec![
            (b.year % 100) as u32 / 10,
            (b.year % 100) as u32 % 10,
            b.month / 10,
            b.month % 10,
            b.day / 10,
            b.day % 10,
            sex_digit,
            region / 10,
            region % 10,
        ];
        payload.extend((0..3).map(|_| rng.random_range(0..10u32)));
        payload.push(check_digit(&payload));
        payload
            .iter()
            .map(|x| char::from(b'0' + *x as u8))
            .collect()
    }

    fn uncertainties(&self) -> &'static [&'static str] {
        &[
            "Numbers dated 2020-10 or later may follow the October 2020 scheme (six random digits \
             after the sex digit): their check digit and region code are not enforced, and no \
             region is decoded from them.",
            "Only the Seoul (00-08) and Busan (09-12) region ranges are documented; other places \
             of birth get a code from 13-96 drawn from the rng, and codes above 96 are rejected \
             as common validators do.",
            "No reserved range exists: a generated number can coincide with a real one.",
            "Birth dates after the fixed as-of date (2026-12-31) are rejected as impossible.",
        ]
    }
}

/// The subject's birth date, moved into the span the number can express.
fn encodable(d: Date) -> Date {
    if d.year < 1800 {
        Date {
            year: 1800,
            month: 1,
            day: 1,
        }
    } else if d > AS_OF {
        AS_OF
    } else {
        d
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{digit_substitutions, rng, subject};
    use super::*;

    fn decode(s: &str) -> Result<Evidence, Problem> {
        SCHEME.decode(&SCHEME.normalize(s))
    }

    #[test]
    fn worked_example_is_accepted_and_decoded() {
        assert_eq!(SCHEME.normalize("850315-1012348"), "8503151012348");
        assert_eq!(check_digit(&checks::digits("850315101234").unwrap()), 8);
        let ev = decode("850315-1012348").unwrap();
        assert_eq!(ev.document, "RRN");
        assert_eq!(ev.birth_date, Date::new(1985, 3, 15));
        assert_eq!(ev.sex, Some(Sex::Male));
        assert_eq!(ev.region.as_deref(), Some("01"));
        assert_eq!(ev.born_abroad, None);
    }

    #[test]
    fn every_substitution_of_the_worked_example_is_rejected() {
        // Its weighted sum is 3 (mod 11), away from the two residues that share a check digit.
        for (i, v, m) in digit_substitutions("8503151012348") {
            assert!(
                SCHEME.decode(&m).is_err(),
                "{m} (position {i} -> {v}) accepted"
            );
        }
    }

    #[test]
    fn only_the_residue_0_and_10_collisions_go_undetected() {
        // The check digit is (11 - S mod 11) mod 10, so S ≡ 0 and S ≡ 10 (mod 11) both give 1.
        // Every weight is invertible mod 11, so a single change of digit i by δ moves S by
        // w_i·δ ≢ 0: it is caught unless it moves S between those two residues, which happens
        // for the one δ with w_i·δ ≡ ±1 (mod 11) when the new digit exists and the changed
        // number still has a real, pre-2020 date and a region code <= 96.
        // Specimen with S ≡ 10: the undetected changes are those with w_i·δ ≡ 1.
        let spec = "8503151010091";
        assert_eq!(
            checks::weighted_sum(&checks::digits(&spec[..12]).unwrap(), &WEIGHTS) % 11,
            10
        );
        assert!(SCHEME.decode(spec).is_ok());
        let accepted: Vec<(usize, char)> = digit_substitutions(spec)
            .into_iter()
            .filter(|(_, _, m)| SCHEME.decode(m).is_ok())
            .map(|(i, v, _)| (i, v))
            .collect();
        let expected = vec![
            (0, '3'),
            (1, '9'),
            (3, '1'),
            (5, '2'),
            (7, '5'),
            (8, '7'),
            (9, '4'),
            (10, '3'),
            (11, '7'),
        ];
        assert_eq!(accepted, expected);
        // The other positions: 2 and 4 would give month 33 and day 35, and 6 (weight 8,
        // δ = 7 turns 1 into 8) a foreign female born in 2085, rejected as a future date.
        for (i, v) in expected {
            let mut m: Vec<char> = spec.chars().collect();
            m[i] = v;
            let payload = checks::digits(&m[..12].iter().collect::<String>()).unwrap();
            assert_eq!(checks::weighted_sum(&payload, &WEIGHTS) % 11, 0);
        }
    }

    #[test]
    fn century_and_sex_digit() {
        // A valid number dated 29 February of a leap year for each digit-7 value.
        let cases = [
            (9, 1896, Sex::Male),
            (0, 1896, Sex::Female),
            (1, 1996, Sex::Male),
            (2, 1996, Sex::Female),
            (3, 2004, Sex::Male),
            (4, 2004, Sex::Female),
            (5, 1996, Sex::Male),
            (6, 1996, Sex::Female),
            (7, 2004, Sex::Male),
            (8, 2004, Sex::Female),
        ];
        for (digit, year, sex) in cases {
            let yy = year % 100;
            let mut p = checks::digits(&format!("{yy:02}0229{digit}123456")).unwrap();
            p.truncate(12);
            let s: String = p
                .iter()
                .chain(std::iter::once(&check_digit(&p)))
                .map(|x| char::from(b'0' + *x as u8))
                .collect();
            let ev = SCHEME.decode(&s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(ev.birth_date, Date::new(year, 2, 29));
            assert_eq!(ev.sex, Some(sex));
            assert_eq!(ev.region.is_some(), digit <= 4 || digit == 9);
        }
        // 1900 is not a leap year, 2000 is.
        let p = checks::digits("000229212345").unwrap();
        let s = format!("000229212345{}", check_digit(&p));
        assert!(matches!(SCHEME.decode(&s), Err(Problem::InvalidDate(_))));
        let p = checks::digits("000229412345").unwrap();
        let s = format!("000229412345{}", check_digit(&p));
        assert_eq!(
            SCHEME.decode(&s).unwrap().birth_date,
            Date::new(2000, 2, 29)
        );
    }

    #[test]
    fn numbers_dated_after_the_reform_skip_checksum_and_region() {
        // 2021-05-06, female, random tail with a wrong check digit and a code above 96.
        let ev = SCHEME.decode("2105064991230").unwrap();
        assert_eq!(ev.birth_date, Date::new(2021, 5, 6));
        assert_eq!(ev.sex, Some(Sex::Female));
        assert_eq!(ev.region, None);
        // 2020-09-30 is still under the old rules.
        let p = checks::digits("200930400123").unwrap();
        let c = check_digit(&p);
        assert!(SCHEME.decode(&format!("200930400123{c}")).is_ok());
        assert!(matches!(
            SCHEME.decode(&format!("200930400123{}", (c + 1) % 10)),
            Err(Problem::CheckDigit(_))
        ));
    }

    #[test]
    fn malformed_numbers_are_rejected() {
        assert!(matches!(
            SCHEME.decode("850315101234"),
            Err(Problem::Syntax(_))
        ));
        assert!(matches!(
            SCHEME.decode("85031510123480"),
            Err(Problem::Syntax(_))
        ));
        assert!(matches!(
            SCHEME.decode("85031510123A8"),
            Err(Problem::Syntax(_))
        ));
        assert!(matches!(
            SCHEME.decode("850315-1012348"),
            Err(Problem::Syntax(_))
        ));
        // Month 13, day 32, 31 April.
        for p in ["851315101234", "850332101234", "850431101234"] {
            let s = format!("{p}{}", check_digit(&checks::digits(p).unwrap()));
            assert!(
                matches!(SCHEME.decode(&s), Err(Problem::InvalidDate(_))),
                "{s}"
            );
        }
        // Region 97.
        let p = "850315197234";
        let s = format!("{p}{}", check_digit(&checks::digits(p).unwrap()));
        assert!(matches!(SCHEME.decode(&s), Err(Problem::Impossible(_))));
        // Born in 2085.
        let p = "850315301234";
        let s = format!("{p}{}", check_digit(&checks::digits(p).unwrap()));
        assert!(matches!(SCHEME.decode(&s), Err(Problem::Impossible(_))));
        assert!(matches!(
            SCHEME.decode("8503151012349"),
            Err(Problem::CheckDigit(_))
        ));
    }

    #[test]
    fn generated_numbers_decode_to_the_subject() {
        let subjects = [
            subject(Sex::Male, (1985, 3, 15), "KOR", Some("11")),
            subject(Sex::Female, (1962, 12, 31), "KOR", Some("10")),
            subject(Sex::Female, (2004, 2, 29), "KOR", Some("13")),
            subject(Sex::Male, (1899, 7, 4), "USA", None),
            subject(Sex::Female, (2021, 1, 9), "KOR", Some("11")),
        ];
        let mut r = rng("kor");
        for s in &subjects {
            for _ in 0..50 {
                let id = SCHEME.generate(s, &mut r);
                let ev = SCHEME.decode(&id).unwrap_or_else(|e| panic!("{id}: {e}"));
                assert_eq!(ev.birth_date, Some(s.birth_date));
                assert_eq!(ev.sex, Some(s.sex));
                // Every generated number also passes the pre-2020 checksum.
                let d = checks::digits(&id).unwrap();
                assert_eq!(d[12], check_digit(&d[..12]));
                let code: u32 = id[7..9].parse().unwrap();
                match s.birth_admin1 {
                    Some("11") => assert!(code <= 8),
                    Some("10") => assert!((9..=12).contains(&code)),
                    Some(_) => assert!((13..=96).contains(&code)),
                    None => assert!(code <= 96),
                }
                if s.birth_date < REFORM {
                    assert_eq!(ev.region.as_deref(), Some(&id[7..9]));
                }
            }
        }
    }
}
