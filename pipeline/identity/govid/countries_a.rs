//! Identifier schemes, group A: USA, CHN, IND, BRA, MEX, NGA, DEU, JPN, GBR, CAN, COL, FRA, POL.
//!
//! Each country module holds one unit struct implementing [`Scheme`] and a `SCHEME` static.
//! The helpers below are shared by those modules only.

pub(crate) use super::common::{compact, exact_digits, number};
use super::{Evidence, Scheme};
use crate::seeding::StageRng;
use rand::Rng;

pub mod bra;
pub mod can;
pub mod chn;
pub mod col;
pub mod deu;
pub mod fra;
pub mod gbr;
pub mod ind;
pub mod jpn;
pub mod mex;
pub mod nga;
pub mod pol;
pub mod usa;

pub fn schemes() -> Vec<&'static dyn Scheme> {
    vec![
        &usa::SCHEME,
        &chn::SCHEME,
        &ind::SCHEME,
        &bra::SCHEME,
        &mex::SCHEME,
        &nga::SCHEME,
        &deu::SCHEME,
        &jpn::SCHEME,
        &gbr::SCHEME,
        &can::SCHEME,
        &col::SCHEME,
        &fra::SCHEME,
        &pol::SCHEME,
    ]
}

/// Evidence carrying only the document name; schemes fill in what they decode.
fn evidence(document: &str) -> Evidence {
    Evidence {
        document: document.to_string(),
        ..Evidence::default()
    }
}

/// `n` uniformly drawn decimal digits.
fn random_digits(rng: &mut StageRng, n: usize) -> Vec<u32> {
    (0..n).map(|_| rng.random_range(0..10u32)).collect()
}

/// Decimal digits rendered as a string.
fn render(d: &[u32]) -> String {
    d.iter()
        .map(|&x| char::from_digit(x, 10).expect("decimal digit"))
        .collect()
}

/// One element of a non-empty list, chosen by the rng.
fn pick<'a, T>(rng: &mut StageRng, items: &'a [T]) -> &'a T {
    &items[rng.random_range(0..items.len())]
}

#[cfg(test)]
mod testkit {
    use super::super::{Date, Sex, Subject};

    pub const DIGITS: &str = "0123456789";

    pub fn subject(
        given: &'static str,
        surname: &'static str,
        sex: Sex,
        birth: (i32, u32, u32),
        country: &'static str,
        admin1: Option<&'static str>,
    ) -> Subject<'static> {
        Subject {
            given_name: given,
            surname,
            sex,
            birth_date: Date::new(birth.0, birth.1, birth.2).expect("test birth date"),
            birth_country_iso3: country,
            birth_city: "",
            birth_admin1: admin1,
        }
    }

    /// A handful of varied subjects; the issuing-country ones carry that country's admin1.
    pub fn subjects(country: &'static str, admin1: &[&'static str]) -> Vec<Subject<'static>> {
        let mut v = vec![
            subject("Ana", "Souza", Sex::Female, (1944, 2, 29), "PRT", None),
            subject("John", "Smith", Sex::Male, (2007, 12, 31), country, None),
            subject("Mei", "Lin", Sex::Female, (1999, 1, 1), country, None),
            subject("Omar", "Haddad", Sex::Male, (2000, 2, 29), "EGY", None),
        ];
        for (i, a) in admin1.iter().enumerate() {
            let sex = if i % 2 == 0 { Sex::Male } else { Sex::Female };
            let year = 1950 + (i as i32 * 7) % 57;
            let month = 1 + (i as u32 * 5) % 12;
            let day = 1 + (i as u32 * 11) % 28;
            v.push(subject(
                "Lee",
                "Park",
                sex,
                (year, month, day),
                country,
                Some(a),
            ));
        }
        v
    }

    /// Every string that differs from `id` in exactly one position, the new character taken
    /// from `alphabet`: (position, new character, mutated string).
    pub fn substitutions(id: &str, alphabet: &str) -> Vec<(usize, char, String)> {
        let chars: Vec<char> = id.chars().collect();
        let mut out = Vec::new();
        for (i, &c) in chars.iter().enumerate() {
            for a in alphabet.chars().filter(|&a| a != c) {
                let mut m = chars.clone();
                m[i] = a;
                out.push((i, a, m.into_iter().collect()));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_strips_separators_and_upper_cases() {
        assert_eq!(compact(" ab-12.3/4\tc ", false), "AB1234C");
        assert_eq!(compact("ñ", false), "Ñ");
    }

    #[test]
    fn every_group_a_country_once() {
        let codes: Vec<&str> = schemes().iter().map(|s| s.iso3()).collect();
        let expected = [
            "USA", "CHN", "IND", "BRA", "MEX", "NGA", "DEU", "JPN", "GBR", "CAN", "COL", "FRA",
            "POL",
        ];
        assert_eq!(codes, expected);
    }

    #[test]
    fn generated_ids_survive_normalization() {
        let subjects = testkit::subjects("XXX", &[]);
        for s in schemes() {
            let mut rng = crate::seeding::rng(3, "test", s.iso3());
            for subj in &subjects {
                let id = s.generate(subj, &mut rng);
                assert_eq!(s.normalize(&id), id, "{}", s.iso3());
                assert!(s.decode(&id).is_ok(), "{} {id}", s.iso3());
            }
        }
    }
}
