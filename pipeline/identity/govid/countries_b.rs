//! Identifier schemes, group B: South Korea, Indonesia, the Philippines, Vietnam, Pakistan,
//! Bangladesh, Egypt, Turkey, Iran, Ethiopia, South Africa, Kenya and Australia.
//!
//! This file also holds the small helpers the group's schemes share: normalisation, digit
//! parsing, date checks and the fixed "as of" date that stands in for today.

pub(crate) use super::common::{compact, exact_digits, number};
use super::{checks, Date, Problem, Scheme};
use crate::seeding::StageRng;
use rand::Rng;

pub mod aus;
pub mod bgd;
pub mod egy;
pub mod eth;
pub mod idn;
pub mod irn;
pub mod ken;
pub mod kor;
pub mod pak;
pub mod phl;
pub mod tur;
pub mod vnm;
pub mod zaf;

pub fn schemes() -> Vec<&'static dyn Scheme> {
    vec![
        &kor::SCHEME,
        &idn::SCHEME,
        &phl::SCHEME,
        &vnm::SCHEME,
        &pak::SCHEME,
        &bgd::SCHEME,
        &egy::SCHEME,
        &tur::SCHEME,
        &irn::SCHEME,
        &eth::SCHEME,
        &zaf::SCHEME,
        &ken::SCHEME,
        &aus::SCHEME,
    ]
}

pub use super::RULES_AS_OF as AS_OF;

/// A calendar date, or `InvalidDate` naming the fields.
pub(crate) fn calendar_date(year: i32, month: u32, day: u32) -> Result<Date, Problem> {
    Date::new(year, month, day).ok_or_else(|| {
        Problem::InvalidDate(format!(
            "{year:04}-{month:02}-{day:02} is not a calendar date"
        ))
    })
}

/// A birth date with an explicit century must not lie after [`AS_OF`].
pub(crate) fn not_after_as_of(date: Date) -> Result<Date, Problem> {
    if date > AS_OF {
        Err(Problem::Impossible(format!(
            "birth date {date} lies in the future (after {AS_OF})"
        )))
    } else {
        Ok(date)
    }
}

/// A date written with a two-digit year: the latest of 20yy and 19yy that is a calendar date
/// not after [`AS_OF`]. The subject's century is therefore recovered only for people younger
/// than about a hundred years, which the scheme itself cannot do better.
pub(crate) fn two_digit_year_date(yy: u32, month: u32, day: u32) -> Result<Date, Problem> {
    for century in [2000, 1900] {
        if let Some(d) = Date::new(century + yy as i32, month, day) {
            if d <= AS_OF {
                return Ok(d);
            }
        }
    }
    Err(Problem::InvalidDate(format!(
        "{yy:02}-{month:02}-{day:02} is not a calendar date in 19{yy:02} or 20{yy:02}"
    )))
}

/// A number shaped like a default MOSIP UIN: first digit 2-9, no digit repeated next to
/// itself, no run of three ascending or descending digits, and a Verhoeff check digit last.
/// Used for the MOSIP-based schemes (Philippines, Ethiopia) whose own policy is not public.
pub(crate) fn mosip_like(rng: &mut StageRng, len: usize) -> String {
    loop {
        let mut d: Vec<u32> = Vec::with_capacity(len);
        d.push(rng.random_range(2..10));
        while d.len() < len - 1 {
            d.push(rng.random_range(0..10));
        }
        d.push(checks::verhoeff_digit(&d));
        if mosip_pattern_free(&d) {
            return d.iter().map(|&x| char::from(b'0' + x as u8)).collect();
        }
    }
}

/// No adjacent repeated digit and no three consecutive ascending or descending digits.
pub(crate) fn mosip_pattern_free(d: &[u32]) -> bool {
    let repeats = d.windows(2).any(|w| w[0] == w[1]);
    let runs = d.windows(3).any(|w| {
        let (a, b, c) = (w[0] as i32, w[1] as i32, w[2] as i32);
        (b - a == 1 && c - b == 1) || (a - b == 1 && b - c == 1)
    });
    !repeats && !runs
}

/// Helpers for the group's unit tests.
#[cfg(test)]
pub(crate) mod testkit {
    use super::super::{Date, Sex, Subject};

    /// Every string obtained from `id` by replacing one digit with another digit, with the
    /// position and the new digit.
    pub fn digit_substitutions(id: &str) -> Vec<(usize, char, String)> {
        let chars: Vec<char> = id.chars().collect();
        let mut out = Vec::new();
        for (i, &c) in chars.iter().enumerate() {
            if !c.is_ascii_digit() {
                continue;
            }
            for v in '0'..='9' {
                if v != c {
                    let mut m = chars.clone();
                    m[i] = v;
                    out.push((i, v, m.into_iter().collect()));
                }
            }
        }
        out
    }

    pub fn subject<'a>(
        sex: Sex,
        birth: (i32, u32, u32),
        country: &'a str,
        admin1: Option<&'a str>,
    ) -> Subject<'a> {
        Subject {
            given_name: "Test",
            surname: "Subject",
            sex,
            birth_date: Date::new(birth.0, birth.1, birth.2).expect("test birth date"),
            birth_country_iso3: country,
            birth_city: "Somewhere",
            birth_admin1: admin1,
        }
    }

    pub fn rng(key: &str) -> crate::seeding::StageRng {
        crate::seeding::rng(1, "test", key)
    }

    #[test]
    fn compact_strips_separators_and_maps_local_digits() {
        assert_eq!(super::compact(" 850315-1012348 ", false), "8503151012348");
        assert_eq!(super::compact("a0.04/416 331m", false), "A004416331M");
        assert_eq!(super::compact("٢٩٠٠١٠١٠١٠١٢٣٤", true), "29001010101234");
        assert_eq!(super::compact("۰۹۳۲۸۳۳۸۱۰", true), "0932833810");
        assert_eq!(super::compact("۰۹۳", false), "۰۹۳");
    }

    #[test]
    fn two_digit_years_take_the_latest_century_not_in_the_future() {
        let d = super::two_digit_year_date(45, 8, 17).unwrap();
        assert_eq!(d, Date::new(1945, 8, 17).unwrap());
        let d = super::two_digit_year_date(5, 1, 2).unwrap();
        assert_eq!(d, Date::new(2005, 1, 2).unwrap());
        // 29 February of year 00: 2000 is a leap year.
        let d = super::two_digit_year_date(0, 2, 29).unwrap();
        assert_eq!(d, Date::new(2000, 2, 29).unwrap());
        assert!(matches!(
            super::two_digit_year_date(1, 2, 29),
            Err(super::Problem::InvalidDate(_))
        ));
    }

    #[test]
    fn every_scheme_generates_compact_decodable_numbers() {
        let schemes = super::schemes();
        let mut iso3: Vec<&str> = schemes.iter().map(|s| s.iso3()).collect();
        iso3.sort_unstable();
        iso3.dedup();
        assert_eq!(iso3.len(), 13);
        let people = [
            (Sex::Female, (1958, 2, 28)),
            (Sex::Male, (1984, 2, 29)),
            (Sex::Female, (2008, 11, 29)),
        ];
        for scheme in schemes {
            let mut r = rng(scheme.iso3());
            for (sex, birth) in people {
                for born_home in [true, false] {
                    let country = if born_home { scheme.iso3() } else { "XXX" };
                    let s = subject(sex, birth, country, None);
                    let id = scheme.generate(&s, &mut r);
                    assert_eq!(scheme.normalize(&id), id, "{}", scheme.iso3());
                    let ev = scheme
                        .decode(&id)
                        .unwrap_or_else(|e| panic!("{} {id}: {e}", scheme.iso3()));
                    assert_eq!(ev.document, scheme.document());
                    if let Some(d) = ev.birth_date {
                        assert_eq!(d, s.birth_date, "{} {id}", scheme.iso3());
                    }
                    if let Some(y) = ev.birth_year {
                        assert_eq!(y, birth.0, "{} {id}", scheme.iso3());
                    }
                    if let Some(x) = ev.sex {
                        assert_eq!(x, sex, "{} {id}", scheme.iso3());
                    }
                    if let Some(abroad) = ev.born_abroad {
                        assert_eq!(abroad, !born_home, "{} {id}", scheme.iso3());
                    }
                }
            }
            assert!(!scheme.uncertainties().is_empty());
        }
    }

    #[test]
    fn mosip_like_numbers_follow_the_pattern_rules() {
        let mut r = rng("mosip");
        for _ in 0..200 {
            let s = super::mosip_like(&mut r, 12);
            let d = super::checks::digits(&s).unwrap();
            assert_eq!(d.len(), 12);
            assert!(d[0] >= 2);
            assert!(super::checks::verhoeff_valid(&d));
            assert!(super::mosip_pattern_free(&d));
        }
    }
}
