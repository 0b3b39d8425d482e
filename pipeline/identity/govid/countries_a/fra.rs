//! France: NIR ("numéro de sécurité sociale"), 13 characters and a 2-digit key, written
//! `S YY MM DD CCC OOO KK`:
//!
//! | positions | content |
//! |---|---|
//! | 1 | sex, 1 male, 2 female |
//! | 2-3 | birth year, two digits |
//! | 4-5 | birth month 01-12 (20, 30-42 and 50+ occur for incomplete civil records) |
//! | 6-10 | place of birth: department (01-95, 2A, 2B) + commune; overseas 97x/98x + commune; abroad 99 + country |
//! | 11-13 | order number 001-999 |
//! | 14-15 | key = 97 − (N mod 97), N the first 13 characters with 2A read as 19 and 2B as 18 |

use super::{compact, evidence, pick};
use crate::identity::govid::{Evidence, Problem, Scheme, Sex, Subject};
use crate::seeding::StageRng;
use rand::Rng;

pub struct Nir;

pub static SCHEME: Nir = Nir;

/// Two-digit years up to this value are read as 20YY, later ones as 19YY. The NIR does not
/// encode the century; the pivot is the year of the rules' "today" ([`RULES_AS_OF`]), shared
/// with every other scheme, so every adult of the frame (ages 18-80) and every child born
/// since 2000 decodes to the right year.
const CENTURY_PIVOT: u32 = (crate::identity::govid::RULES_AS_OF.year % 100) as u32;

/// GeoNames admin1 code of a metropolitan region → its departments. Departments 91-95 are
/// left out: before 1968 those codes meant Algeria and Morocco, so they do not say whether
/// the holder was born in France.
const DEPARTMENTS_BY_ADMIN1: [(&str, &[&str]); 13] = [
    ("11", &["75", "77", "78"]),                   // Île-de-France
    ("24", &["18", "28", "36", "37", "41", "45"]), // Centre-Val de Loire
    ("27", &["21", "25", "39", "58", "70", "71", "89", "90"]), // Bourgogne-Franche-Comté
    ("28", &["14", "27", "50", "61", "76"]),       // Normandie
    ("32", &["02", "59", "60", "62", "80"]),       // Hauts-de-France
    (
        "44",
        &["08", "10", "51", "52", "54", "55", "57", "67", "68", "88"],
    ), // Grand Est
    ("52", &["44", "49", "53", "72", "85"]),       // Pays de la Loire
    ("53", &["22", "29", "35", "56"]),             // Bretagne
    (
        "75",
        &[
            "16", "17", "19", "23", "24", "33", "40", "47", "64", "79", "86", "87",
        ],
    ), // Nouvelle-Aquitaine
    (
        "76",
        &[
            "09", "11", "12", "30", "31", "32", "34", "46", "48", "65", "66", "81", "82",
        ],
    ), // Occitanie
    (
        "84",
        &[
            "01", "03", "07", "15", "26", "38", "42", "43", "63", "69", "73", "74",
        ],
    ), // Auvergne-Rhône-Alpes
    ("93", &["04", "05", "06", "13", "83", "84"]), // Provence-Alpes-Côte d'Azur
    ("94", &["2A", "2B"]),                         // Corse
];

/// Departments (as decoded into `region`) consistent with a GeoNames admin1 code of France.
pub fn departments_for_admin1(admin1: &str) -> Option<&'static [&'static str]> {
    DEPARTMENTS_BY_ADMIN1
        .iter()
        .find(|(a, _)| *a == admin1)
        .map(|(_, d)| *d)
}

/// The key of the first 13 characters, or `None` if they are not digits (2A/2B aside).
fn key(first13: &str) -> Option<u64> {
    let numeric = match &first13[5..7] {
        "2A" => format!("{}19{}", &first13[..5], &first13[7..]),
        "2B" => format!("{}18{}", &first13[..5], &first13[7..]),
        _ => first13.to_string(),
    };
    let n: u64 = numeric.parse().ok()?;
    Some(97 - n % 97)
}

fn all_digits(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_digit())
}

impl Scheme for Nir {
    fn iso3(&self) -> &'static str {
        "FRA"
    }

    fn document(&self) -> &'static str {
        "NIR"
    }

    fn normalize(&self, raw: &str) -> String {
        compact(raw, false)
    }

    fn decode(&self, id: &str) -> Result<Evidence, Problem> {
        if id.len() != 15 || !id.is_ascii() {
            return Err(Problem::Syntax(format!(
                "expected 15 characters, got {}",
                id.chars().count()
            )));
        }
        // Secondary sources mention first digits 3, 4, 7 and 8 for special and provisional
        // numbers; the reference does not confirm them, so only 1 and 2 are accepted.
        let sex = match &id[..1] {
            "1" => Sex::Male,
            "2" => Sex::Female,
            _ => {
                return Err(Problem::Syntax(
                    "the first digit (sex) must be 1 or 2".into(),
                ))
            }
        };
        let dept = &id[5..7];
        if !all_digits(&id[1..5]) || !all_digits(&id[7..]) {
            return Err(Problem::Syntax(
                "only digits, apart from 2A/2B for Corsica".into(),
            ));
        }
        if !(all_digits(dept) || dept == "2A" || dept == "2B") {
            return Err(Problem::Syntax(
                "characters 6-7 must be digits, 2A or 2B".into(),
            ));
        }
        let expected = key(&id[..13]).expect("checked digits");
        let found: u64 = id[13..].parse().expect("checked digits");
        if found != expected {
            return Err(Problem::CheckDigit(format!(
                "expected key {expected:02}, found {found:02}"
            )));
        }
        let yy: u32 = id[1..3].parse().expect("digits");
        let mm: u32 = id[3..5].parse().expect("digits");
        // Months 20 and above stand for incomplete civil records and carry no month.
        let month = match mm {
            1..=12 => Some(mm),
            20..=99 => None,
            _ => return Err(Problem::InvalidDate(format!("month {mm:02}"))),
        };
        if &id[10..13] == "000" {
            return Err(Problem::Impossible(
                "order number 000 is never assigned".into(),
            ));
        }
        let year = if yy <= CENTURY_PIVOT {
            2000 + yy
        } else {
            1900 + yy
        };
        let (region, born_abroad) = match dept {
            "99" => ("99".to_string(), Some(true)),
            // Tunisia before independence.
            "96" => ("96".to_string(), Some(true)),
            // Algeria / Morocco before independence, or the Île-de-France departments created
            // in 1968: ambiguous.
            "91" | "92" | "93" | "94" | "95" => (dept.to_string(), None),
            "97" | "98" => (id[5..8].to_string(), Some(false)),
            _ => (dept.to_string(), Some(false)),
        };
        let mut ev = evidence(self.document());
        ev.sex = Some(sex);
        ev.birth_year = Some(year as i32);
        ev.birth_month = month;
        ev.region = Some(region);
        ev.born_abroad = born_abroad;
        Ok(ev)
    }

    /// Sex, two-digit year and month from the subject. Place: for subjects born abroad `99`
    /// followed by a country code drawn from the rng (there is no country table); for those
    /// born in France a department of the birth region when its admin1 code is known,
    /// otherwise one drawn from the rng, followed by a random commune number. The order
    /// number is random. No range is reserved for fiction, so a generated number may
    /// coincide with an issued one; the random commune and country codes need not exist.
    fn generate(&self, subject: &Subject, rng: &mut StageRng) -> String {
        let b = subject.birth_date;
        let sex = match subject.sex {
            Sex::Male => 1,
            Sex::Female => 2,
        };
        let place = if subject.birth_country_iso3 != "FRA" {
            format!("99{:03}", rng.random_range(101..=599u32))
        } else {
            let depts = subject
                .birth_admin1
                .and_then(departments_for_admin1)
                .unwrap_or_else(|| pick(rng, &DEPARTMENTS_BY_ADMIN1).1);
            format!("{}{:03}", pick(rng, depts), rng.random_range(1..=999u32))
        };
        let order = rng.random_range(1..=999u32);
        let first13 = format!(
            "{sex}{:02}{:02}{place}{order:03}",
            b.year.rem_euclid(100),
            b.month
        );
        let k = key(&first13).expect("digits");
        format!("{first13}{k:02}")
    }

    fn uncertainties(&self) -> &'static [&'static str] {
        &[
            "First digits 3, 4, 7 and 8 (special and provisional numbers) are unconfirmed and rejected.",
            "The century is not encoded; two-digit years up to 26 (the rules' reference year, 2026) are read as 20YY, later ones as 19YY.",
            "Months 20, 30-42 and 50+ (incomplete civil records) are accepted without a decoded month; 00 and 13-19 are rejected.",
            "Departments 91-95 meant Algeria/Morocco before independence and are Île-de-France departments since 1968; born_abroad is left unknown for them.",
            "Commune and country codes are not checked against INSEE tables; generated ones are random and need not exist.",
            "No range is reserved for fiction, so generated numbers may coincide with issued ones.",
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{self, substitutions};
    use super::*;

    fn with_key(first13: &str) -> String {
        format!("{first13}{:02}", key(first13).unwrap())
    }

    #[test]
    fn reference_specimens_decode() {
        assert_eq!(SCHEME.normalize("2 95 10 99 126 111 93"), "295109912611193");
        assert_eq!(2_951_099_126_111u64 % 97, 4);
        let ev = SCHEME.decode("295109912611193").unwrap();
        assert_eq!(ev.sex, Some(Sex::Female));
        assert_eq!(ev.birth_year, Some(1995));
        assert_eq!(ev.birth_month, Some(10));
        assert_eq!(ev.region.as_deref(), Some("99"));
        assert_eq!(ev.born_abroad, Some(true));

        assert_eq!(2_530_718_073_004u64 % 97, 27);
        let ev = SCHEME.decode("253072B07300470").unwrap();
        assert_eq!(ev.sex, Some(Sex::Female));
        assert_eq!(ev.birth_year, Some(1953));
        assert_eq!(ev.birth_month, Some(7));
        assert_eq!(ev.region.as_deref(), Some("2B"));
        assert_eq!(ev.born_abroad, Some(false));
    }

    #[test]
    fn every_single_substitution_is_rejected() {
        let mut rng = crate::seeding::rng(1, "test", "fra-subst");
        let mut ids = vec!["295109912611193".to_string(), "253072B07300470".to_string()];
        for s in testkit::subjects("FRA", &["11", "94"]) {
            ids.push(SCHEME.generate(&s, &mut rng));
        }
        for id in &ids {
            for (i, c, m) in substitutions(id, "0123456789AB") {
                assert!(SCHEME.decode(&m).is_err(), "{id}: {c} at {i} accepted");
            }
        }
    }

    #[test]
    fn sex_year_month_and_place_decode() {
        let ev = SCHEME.decode(&with_key("1070575056123")).unwrap();
        assert_eq!(
            (ev.sex, ev.birth_year, ev.birth_month),
            (Some(Sex::Male), Some(2007), Some(5))
        );
        assert_eq!(
            (ev.region.as_deref(), ev.born_abroad),
            (Some("75"), Some(false))
        );
        let ev = SCHEME.decode(&with_key("2270197410001")).unwrap();
        assert_eq!(
            (ev.birth_year, ev.region.as_deref()),
            (Some(1927), Some("974"))
        );
        assert_eq!(ev.born_abroad, Some(false));
        let ev = SCHEME.decode(&with_key("1254191001002")).unwrap();
        assert_eq!((ev.birth_year, ev.birth_month), (Some(2025), None));
        assert_eq!((ev.region.as_deref(), ev.born_abroad), (Some("91"), None));
        let ev = SCHEME.decode(&with_key("1553096001002")).unwrap();
        assert_eq!(ev.born_abroad, Some(true));
        let ev = SCHEME.decode(&with_key("245052A004001")).unwrap();
        assert_eq!(ev.region.as_deref(), Some("2A"));
    }

    #[test]
    fn rejects_invalid_months_and_malformed_input() {
        for first13 in ["1950075056123", "1951375056123", "1951975056123"] {
            let id = with_key(first13);
            assert!(
                matches!(SCHEME.decode(&id), Err(Problem::InvalidDate(_))),
                "{id}"
            );
        }
        let id = with_key("1951075056000");
        assert!(
            matches!(SCHEME.decode(&id), Err(Problem::Impossible(_))),
            "{id}"
        );
        assert!(matches!(
            SCHEME.decode("295109912611194"),
            Err(Problem::CheckDigit(_))
        ));
        for bad in [
            "29510991261119",
            "2951099126111930",
            "395109912611193",
            "295109912611A93",
            "253072C07300470",
            "2530A2B07300470",
            "29510991261119é",
        ] {
            assert!(
                matches!(SCHEME.decode(bad), Err(Problem::Syntax(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn generated_numbers_agree_with_the_subject() {
        let mut rng = crate::seeding::rng(1, "test", "fra");
        let admin1: Vec<&str> = DEPARTMENTS_BY_ADMIN1.iter().map(|(a, _)| *a).collect();
        for s in testkit::subjects("FRA", &admin1) {
            for _ in 0..5 {
                let id = SCHEME.generate(&s, &mut rng);
                let ev = SCHEME.decode(&id).unwrap();
                assert_eq!(ev.sex, Some(s.sex), "{id}");
                assert_eq!(ev.birth_year, Some(s.birth_date.year), "{id}");
                assert_eq!(ev.birth_month, Some(s.birth_date.month), "{id}");
                assert_eq!(ev.born_abroad, Some(s.birth_country_iso3 != "FRA"), "{id}");
                if let Some(a) = s.birth_admin1 {
                    let region = ev.region.unwrap();
                    assert!(
                        departments_for_admin1(a)
                            .unwrap()
                            .contains(&region.as_str()),
                        "{id}"
                    );
                }
            }
        }
    }
}
