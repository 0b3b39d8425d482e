//! China: citizen identity number (GB 11643-1999), 18 characters:
//! 6-digit address code (GB/T 2260), birth date `YYYYMMDD`, 3-digit sequence whose last digit
//! is odd for men and even for women, and an ISO 7064 MOD 11-2 check character (`0-9` or `X`).

use super::{compact, evidence, pick, random_digits, render};
use crate::identity::govid::checks;
use crate::identity::govid::{Date, Evidence, Problem, Scheme, Sex, Subject};
use crate::seeding::StageRng;
use rand::Rng;

pub struct ResidentId;

pub static SCHEME: ResidentId = ResidentId;

/// Province-level prefixes of GB/T 2260 (first two digits of the address code).
const PROVINCES: [&str; 34] = [
    "11", "12", "13", "14", "15", "21", "22", "23", "31", "32", "33", "34", "35", "36", "37", "41",
    "42", "43", "44", "45", "46", "50", "51", "52", "53", "54", "61", "62", "63", "64", "65", "71",
    "81", "82",
];

/// GeoNames admin1 code of a mainland province → one county-level GB/T 2260 code in its
/// capital (a district or county that has existed since the resident-ID system began, or
/// since the province was created for Hainan and Chongqing).
const COUNTY_BY_ADMIN1: [(&str, &str); 31] = [
    ("01", "340121"), // Anhui, Hefei: Changfeng
    ("02", "330102"), // Zhejiang, Hangzhou: Shangcheng
    ("03", "360102"), // Jiangxi, Nanchang: Donghu
    ("04", "320102"), // Jiangsu, Nanjing: Xuanwu
    ("05", "220102"), // Jilin, Changchun: Nanguan
    ("06", "630102"), // Qinghai, Xining: Chengdong
    ("07", "350102"), // Fujian, Fuzhou: Gulou
    ("08", "230102"), // Heilongjiang, Harbin: Daoli
    ("09", "410102"), // Henan, Zhengzhou: Zhongyuan
    ("10", "130102"), // Hebei, Shijiazhuang: Chang'an
    ("11", "430121"), // Hunan, Changsha: Changsha county
    ("12", "420102"), // Hubei, Wuhan: Jiang'an
    ("13", "650102"), // Xinjiang, Urumqi: Tianshan
    ("14", "540102"), // Tibet, Lhasa: Chengguan
    ("15", "620102"), // Gansu, Lanzhou: Chengguan
    ("16", "450102"), // Guangxi, Nanning: Xingning
    ("18", "520102"), // Guizhou, Guiyang: Nanming
    ("19", "210102"), // Liaoning, Shenyang: Heping
    ("20", "150102"), // Inner Mongolia, Hohhot: Xincheng
    ("21", "640121"), // Ningxia, Yinchuan: Yongning
    ("22", "110101"), // Beijing: Dongcheng
    ("23", "310101"), // Shanghai: Huangpu
    ("24", "140121"), // Shanxi, Taiyuan: Qingxu
    ("25", "370102"), // Shandong, Jinan: Lixia
    ("26", "610102"), // Shaanxi, Xi'an: Xincheng
    ("28", "120101"), // Tianjin: Heping
    ("29", "530102"), // Yunnan, Kunming: Wuhua
    ("30", "440103"), // Guangdong, Guangzhou: Liwan
    ("31", "460106"), // Hainan, Haikou: Longhua
    ("32", "510104"), // Sichuan, Chengdu: Jinjiang
    ("33", "500103"), // Chongqing: Yuzhong
];

/// GB/T 2260 province prefix (two digits) for a GeoNames admin1 code of China.
pub fn province_for_admin1(admin1: &str) -> Option<&'static str> {
    COUNTY_BY_ADMIN1
        .iter()
        .find(|(a, _)| *a == admin1)
        .map(|(_, county)| &county[..2])
}

fn check_char(payload: &[u32]) -> char {
    match checks::iso7064_mod11_2(payload) {
        10 => 'X',
        v => char::from_digit(v, 10).expect("check value below 10"),
    }
}

impl Scheme for ResidentId {
    fn iso3(&self) -> &'static str {
        "CHN"
    }

    fn document(&self) -> &'static str {
        "Resident ID"
    }

    fn normalize(&self, raw: &str) -> String {
        compact(raw, false)
    }

    fn decode(&self, id: &str) -> Result<Evidence, Problem> {
        let chars: Vec<char> = id.chars().collect();
        if chars.len() != 18 {
            return Err(Problem::Syntax(format!(
                "expected 18 characters, got {}",
                chars.len()
            )));
        }
        let payload = checks::digits(&id[..17])
            .ok_or_else(|| Problem::Syntax("the first 17 characters must be digits".into()))?;
        let last = chars[17];
        if !(last.is_ascii_digit() || last == 'X') {
            return Err(Problem::Syntax(
                "the check character must be 0-9 or X".into(),
            ));
        }
        if payload[0] == 0 {
            return Err(Problem::Syntax(
                "the address code cannot start with 0".into(),
            ));
        }
        let expected = check_char(&payload);
        if last != expected {
            return Err(Problem::CheckDigit(format!(
                "expected {expected}, found {last}"
            )));
        }
        let year = super::number(&payload[6..10]) as i32;
        let month = super::number(&payload[10..12]);
        let day = super::number(&payload[12..14]);
        if !(1800..=2099).contains(&year) {
            return Err(Problem::InvalidDate(format!(
                "birth year {year} outside 1800-2099"
            )));
        }
        let birth = Date::new(year, month, day)
            .ok_or_else(|| Problem::InvalidDate(id[6..14].to_string()))?;
        // Only the province level of the address code is checked: the reference lists the
        // province prefixes but not the full county table with its validity years.
        if !PROVINCES.contains(&&id[..2]) {
            return Err(Problem::Impossible(format!(
                "unknown province code {}",
                &id[..2]
            )));
        }
        let sex = if payload[16] % 2 == 1 {
            Sex::Male
        } else {
            Sex::Female
        };
        let mut ev = evidence(self.document());
        ev.birth_date = Some(birth);
        ev.sex = Some(sex);
        ev.region = Some(id[..6].to_string());
        Ok(ev)
    }

    /// Address code: a county of the birth province's capital when the subject was born in
    /// China in a known province; otherwise (born abroad, or province unknown) a province is
    /// drawn from the rng, since the code records where the number was first issued. Birth
    /// date and sex come from the subject; two sequence digits are random. No range is
    /// reserved for fiction, so a generated number may coincide with an issued one.
    fn generate(&self, subject: &Subject, rng: &mut StageRng) -> String {
        let county = subject
            .birth_admin1
            .filter(|_| subject.birth_country_iso3 == "CHN")
            .and_then(|a| COUNTY_BY_ADMIN1.iter().find(|(code, _)| *code == a))
            .map(|(_, county)| *county)
            .unwrap_or_else(|| pick(rng, &COUNTY_BY_ADMIN1).1);
        let b = subject.birth_date;
        let mut s = format!("{county}{:04}{:02}{:02}", b.year, b.month, b.day);
        s.push_str(&render(&random_digits(rng, 2)));
        let parity = match subject.sex {
            Sex::Male => 1,
            Sex::Female => 0,
        };
        let sex_digit = 2 * rng.random_range(0..5u32) + parity;
        s.push(char::from_digit(sex_digit, 10).expect("digit"));
        let payload = checks::digits(&s).expect("digits");
        s.push(check_char(&payload));
        s
    }

    fn uncertainties(&self) -> &'static [&'static str] {
        &[
            "The address code is validated only at province level (GB/T 2260 province prefixes); the county table with validity years is not enforced.",
            "Prefix 83, reported for residence permits of Taiwan residents, is unconfirmed and rejected.",
            "The legacy 15-digit form (no check digit) is not accepted.",
            "No range is reserved for fiction, so generated numbers may coincide with issued ones.",
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{self, substitutions};
    use super::*;

    const SPECIMEN: &str = "11010519491231002X";

    fn with_check(payload: &str) -> String {
        let d = checks::digits(payload).unwrap();
        format!("{payload}{}", check_char(&d))
    }

    #[test]
    fn gb11643_specimen_decodes() {
        assert_eq!(SCHEME.normalize("11010519491231002x"), SPECIMEN);
        let ev = SCHEME.decode(SPECIMEN).unwrap();
        assert_eq!(ev.birth_date, Date::new(1949, 12, 31));
        assert_eq!(ev.sex, Some(Sex::Female));
        assert_eq!(ev.region.as_deref(), Some("110105"));
        assert_eq!(ev.born_abroad, None);
    }

    #[test]
    fn every_single_substitution_is_rejected() {
        let mut rng = crate::seeding::rng(1, "test", "chn-subst");
        let mut ids = vec![SPECIMEN.to_string()];
        for s in testkit::subjects("CHN", &["22", "30"]) {
            ids.push(SCHEME.generate(&s, &mut rng));
        }
        for id in &ids {
            for (i, c, m) in substitutions(id, "0123456789X") {
                assert!(SCHEME.decode(&m).is_err(), "{id}: {c} at {i} accepted");
            }
        }
    }

    #[test]
    fn sex_follows_the_parity_of_the_17th_digit() {
        for (seq, sex) in [("001", Sex::Male), ("002", Sex::Female), ("339", Sex::Male)] {
            let id = with_check(&format!("44010319800229{seq}"));
            let ev = SCHEME.decode(&id).unwrap();
            assert_eq!(ev.sex, Some(sex));
            assert_eq!(ev.birth_date, Date::new(1980, 2, 29));
        }
    }

    #[test]
    fn rejects_impossible_dates_and_provinces() {
        for payload in [
            "11010519810229001",
            "11010519491301001",
            "11010517991231001",
        ] {
            let id = with_check(payload);
            assert!(
                matches!(SCHEME.decode(&id), Err(Problem::InvalidDate(_))),
                "{id}"
            );
        }
        for payload in ["99010519491231001", "83010519491231001"] {
            let id = with_check(payload);
            assert!(
                matches!(SCHEME.decode(&id), Err(Problem::Impossible(_))),
                "{id}"
            );
        }
    }

    #[test]
    fn rejects_malformed_input() {
        for bad in [
            "11010519491231002",
            "11010519491231002XX",
            "1101051949123100AX",
            "X1010519491231002X",
            "01010519491231002X",
        ] {
            assert!(
                matches!(SCHEME.decode(bad), Err(Problem::Syntax(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            SCHEME.decode("110105194912310021"),
            Err(Problem::CheckDigit(_))
        ));
    }

    #[test]
    fn generated_numbers_agree_with_the_subject() {
        let mut rng = crate::seeding::rng(1, "test", "chn");
        let admin1: Vec<&str> = COUNTY_BY_ADMIN1.iter().map(|(a, _)| *a).collect();
        for s in testkit::subjects("CHN", &admin1) {
            for _ in 0..5 {
                let id = SCHEME.generate(&s, &mut rng);
                let ev = SCHEME.decode(&id).unwrap();
                assert_eq!(ev.birth_date, Some(s.birth_date));
                assert_eq!(ev.sex, Some(s.sex));
                let region = ev.region.unwrap();
                if let Some(a) = s.birth_admin1 {
                    assert_eq!(Some(&region[..2]), province_for_admin1(a), "{id}");
                }
            }
        }
    }
}
