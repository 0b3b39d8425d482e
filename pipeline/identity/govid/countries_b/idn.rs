//! Indonesia: NIK (Nomor Induk Kependudukan), 16 digits `PPKKCC DDMMYY SSSS`.
//!
//! Province, regency and district of registration, the birth date with 40 added to the day
//! for women, and a serial. There is no check digit.

use super::super::{Evidence, Problem, Scheme, Sex, Subject};
use super::{compact, exact_digits, number, two_digit_year_date};
use crate::seeding::StageRng;
use rand::Rng;

pub struct Nik;

pub static SCHEME: Nik = Nik;

/// Province codes accepted in digits 1-2: the Sumatra, Java, Bali/Nusa Tenggara, Kalimantan,
/// Sulawesi and Maluku codes, and 91-96 for Papua (the old 91/94 codes and the codes of the
/// provinces split off in 2022, whose use in numbers is not confirmed).
const PROVINCES: [&str; 38] = [
    "11", "12", "13", "14", "15", "16", "17", "18", "19", "21", "31", "32", "33", "34", "35", "36",
    "51", "52", "53", "61", "62", "63", "64", "65", "71", "72", "73", "74", "75", "76", "81", "82",
    "91", "92", "93", "94", "95", "96",
];

/// Province code for a GeoNames admin1 code of Indonesia. The Papua provinces created in
/// 2022 map to the code of the province they were split from (94 Papua, 91 West Papua).
pub fn province_of_admin1(admin1: &str) -> Option<&'static str> {
    Some(match admin1 {
        "01" => "11",                      // Aceh
        "26" => "12",                      // North Sumatra
        "24" => "13",                      // West Sumatra
        "37" => "14",                      // Riau
        "05" => "15",                      // Jambi
        "32" => "16",                      // South Sumatra
        "03" => "17",                      // Bengkulu
        "15" => "18",                      // Lampung
        "35" => "19",                      // Bangka-Belitung
        "40" => "21",                      // Riau Islands
        "04" => "31",                      // Jakarta
        "30" => "32",                      // West Java
        "07" => "33",                      // Central Java
        "10" => "34",                      // Yogyakarta
        "08" => "35",                      // East Java
        "33" => "36",                      // Banten
        "02" => "51",                      // Bali
        "17" => "52",                      // West Nusa Tenggara
        "18" => "53",                      // East Nusa Tenggara
        "11" => "61",                      // West Kalimantan
        "13" => "62",                      // Central Kalimantan
        "12" => "63",                      // South Kalimantan
        "14" => "64",                      // East Kalimantan
        "42" => "65",                      // North Kalimantan
        "31" => "71",                      // North Sulawesi
        "21" => "72",                      // Central Sulawesi
        "38" => "73",                      // South Sulawesi
        "22" => "74",                      // Southeast Sulawesi
        "34" => "75",                      // Gorontalo
        "41" => "76",                      // West Sulawesi
        "28" => "81",                      // Maluku
        "29" => "82",                      // North Maluku
        "39" | "PD" => "91",               // West Papua, Southwest Papua
        "36" | "PE" | "PS" | "PT" => "94", // Papua, Highland, South and Central Papua
        _ => return None,
    })
}

impl Scheme for Nik {
    fn iso3(&self) -> &'static str {
        "IDN"
    }

    fn document(&self) -> &'static str {
        "NIK"
    }

    fn normalize(&self, raw: &str) -> String {
        compact(raw, false)
    }

    fn decode(&self, id: &str) -> Result<Evidence, Problem> {
        let d = exact_digits(id, 16)?;
        let province = &id[0..2];
        if !PROVINCES.contains(&province) {
            return Err(Problem::Impossible(format!(
                "unknown province code {province}"
            )));
        }
        let day_field = number(&d[6..8]);
        let (sex, day) = match day_field {
            1..=31 => (Sex::Male, day_field),
            41..=71 => (Sex::Female, day_field - 40),
            _ => {
                return Err(Problem::InvalidDate(format!(
                    "day field {day_field:02} is neither 01-31 nor 41-71"
                )))
            }
        };
        // Two-digit year: the latest century that does not put the date in the future.
        let date = two_digit_year_date(number(&d[10..12]), number(&d[8..10]), day)?;
        // A serial of 0000 is reportedly never issued, but that is not confirmed: accepted.
        Ok(Evidence {
            document: self.document().into(),
            birth_date: Some(date),
            sex: Some(sex),
            region: Some(province.to_string()),
            ..Evidence::default()
        })
    }

    fn generate(&self, subject: &Subject, rng: &mut StageRng) -> String {
        // The province is that of registration; people are taken to be registered where they
        // were born. Births abroad or in an unmapped admin1 get a province drawn from the rng.
        let mapped = match (subject.birth_country_iso3, subject.birth_admin1) {
            ("IDN", Some(a1)) => province_of_admin1(a1),
            _ => None,
        };
        let province = mapped.unwrap_or_else(|| PROVINCES[rng.random_range(0..PROVINCES.len())]);
        // Regency 01 exists in every province (Jakarta's five cities are 71-75 instead);
        // regency and district codes are not checked, for lack of a table.
        let regency = if province == "31" {
            rng.random_range(71..=75)
        } else {
            1
        };
        let district = rng.random_range(1..=2);
        let b = subject.birth_date;
        let day = match subject.sex {
            Sex::Male => b.day,
            Sex::Female => b.day + 40,
        };
        let serial = rng.random_range(1..=9999);
        format!(
            "{province}{regency:02}{district:02}{day:02}{:02}{:02}{serial:04}",
            b.month,
            b.year.rem_euclid(100)
        )
    }

    fn uncertainties(&self) -> &'static [&'static str] {
        &[
            "There is no check digit: any well-formed number with a known province and a real \
             date is accepted, and a generated number can coincide with a real one.",
            "Regency and district codes (digits 3-6) are not checked: no table is shipped.",
            "The Papua codes 91-96 are all accepted; which ones numbers use after the 2022 split \
             is not confirmed. Other province codes added after 2012 may be missing.",
            "The serial 0000 is reportedly never issued; it is accepted, but never generated.",
            "The year has two digits: the latest century not after the as-of date (2026-12-31) \
             is taken, so holders aged 100 or more decode a century late.",
            "The place is that of registration, not of birth; generation assumes they agree.",
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{rng, subject};
    use super::*;
    use crate::identity::govid::Date;

    #[test]
    fn reference_specimen_decodes() {
        assert_eq!(SCHEME.normalize("3171 0157 0845 0001"), "3171015708450001");
        let ev = SCHEME.decode("3171015708450001").unwrap();
        assert_eq!(ev.document, "NIK");
        assert_eq!(ev.birth_date, Date::new(1945, 8, 17));
        assert_eq!(ev.sex, Some(Sex::Female));
        assert_eq!(ev.region.as_deref(), Some("31"));
        let ev = SCHEME.decode("3171011708450001").unwrap();
        assert_eq!(ev.birth_date, Date::new(1945, 8, 17));
        assert_eq!(ev.sex, Some(Sex::Male));
    }

    #[test]
    fn birth_date_and_sex() {
        // 29 February 00 exists only in 2000.
        let ev = SCHEME.decode("3171016902001234").unwrap();
        assert_eq!(ev.birth_date, Date::new(2000, 2, 29));
        assert_eq!(ev.sex, Some(Sex::Female));
        // Year 05 is 2005, year 60 is 1960.
        let ev = SCHEME.decode("3273010101050001").unwrap();
        assert_eq!(ev.birth_date, Date::new(2005, 1, 1));
        assert_eq!(ev.sex, Some(Sex::Male));
        let ev = SCHEME.decode("3578037112600042").unwrap();
        assert_eq!(ev.birth_date, Date::new(1960, 12, 31));
        assert_eq!(ev.sex, Some(Sex::Female));
        assert_eq!(ev.region.as_deref(), Some("35"));
    }

    #[test]
    fn malformed_numbers_are_rejected() {
        assert!(matches!(
            SCHEME.decode("317101570845000"),
            Err(Problem::Syntax(_))
        ));
        assert!(matches!(
            SCHEME.decode("31710157084500011"),
            Err(Problem::Syntax(_))
        ));
        assert!(matches!(
            SCHEME.decode("31710157O8450001"),
            Err(Problem::Syntax(_))
        ));
        // Unknown province.
        assert!(matches!(
            SCHEME.decode("9971011708450001"),
            Err(Problem::Impossible(_))
        ));
        assert!(matches!(
            SCHEME.decode("2071011708450001"),
            Err(Problem::Impossible(_))
        ));
        // Day fields 00, 32, 40, 72; month 13; 30 February; 29 February 2001.
        for id in [
            "3171010008450001",
            "3171013208450001",
            "3171014008450001",
            "3171017208450001",
            "3171011713450001",
            "3171013002450001",
            "3171016902010001",
        ] {
            assert!(
                matches!(SCHEME.decode(id), Err(Problem::InvalidDate(_))),
                "{id}"
            );
        }
    }

    #[test]
    fn generated_numbers_decode_to_the_subject() {
        let subjects = [
            subject(Sex::Female, (1945, 8, 17), "IDN", Some("04")),
            subject(Sex::Male, (1990, 1, 31), "IDN", Some("30")),
            subject(Sex::Female, (2000, 2, 29), "IDN", Some("PT")),
            subject(Sex::Male, (1971, 6, 5), "NLD", None),
            subject(Sex::Female, (2007, 12, 1), "IDN", Some("99")),
        ];
        let mut r = rng("idn");
        for s in &subjects {
            for _ in 0..50 {
                let id = SCHEME.generate(s, &mut r);
                let ev = SCHEME.decode(&id).unwrap_or_else(|e| panic!("{id}: {e}"));
                assert_eq!(ev.birth_date, Some(s.birth_date));
                assert_eq!(ev.sex, Some(s.sex));
                assert_ne!(&id[12..], "0000");
                if let (Some(a1), "IDN") = (s.birth_admin1, s.birth_country_iso3) {
                    if let Some(p) = province_of_admin1(a1) {
                        assert_eq!(ev.region.as_deref(), Some(p));
                    }
                }
            }
        }
        assert_eq!(province_of_admin1("04"), Some("31"));
        assert_eq!(province_of_admin1("PT"), Some("94"));
        assert_eq!(province_of_admin1("99"), None);
    }

    #[test]
    fn every_mapped_province_is_accepted() {
        for a1 in [
            "01", "02", "03", "04", "05", "07", "08", "10", "11", "12", "13", "14", "15", "17",
            "18", "21", "22", "24", "26", "28", "29", "30", "31", "32", "33", "34", "35", "36",
            "37", "38", "39", "40", "41", "42", "PD", "PE", "PS", "PT",
        ] {
            let p = province_of_admin1(a1).unwrap();
            assert!(PROVINCES.contains(&p), "{a1} -> {p}");
        }
    }
}
