//! United Kingdom: National Insurance number (NINO), two prefix letters, six digits and a
//! suffix letter A-D, written `QQ 12 34 56 C`. No check digit; nothing about the holder is
//! encoded (the suffix once named a quarter and no longer means anything).

use super::{compact, evidence, pick, random_digits, render};
use crate::identity::govid::{Evidence, Problem, Scheme, Subject};
use crate::seeding::StageRng;

pub struct Nino;

pub static SCHEME: Nino = Nino;

const NEVER_FIRST: &str = "DFIQUV";
const NEVER_SECOND: &str = "DFIOQUV";
/// Prefixes that are never allocated.
const NOT_ALLOCATED: [&str; 7] = ["BG", "GB", "KN", "NK", "NT", "TN", "ZZ"];
/// Administrative prefixes that are not NINOs: tax-credit placeholder (OO), 1980-87 migrant
/// workers and other administrative uses (CR, FY, MW), stakeholder-pension dummies (NC).
const ADMINISTRATIVE: [&str; 5] = ["OO", "CR", "FY", "MW", "NC"];

fn prefix_problem(prefix: &str) -> Option<String> {
    let mut c = prefix.chars();
    let (a, b) = (c.next()?, c.next()?);
    if NEVER_FIRST.contains(a) {
        return Some(format!("{a} is never a first prefix letter"));
    }
    if NEVER_SECOND.contains(b) {
        return Some(format!("{b} is never a second prefix letter"));
    }
    if NOT_ALLOCATED.contains(&prefix) || ADMINISTRATIVE.contains(&prefix) {
        return Some(format!("prefix {prefix} is not used for NINOs"));
    }
    None
}

impl Scheme for Nino {
    fn iso3(&self) -> &'static str {
        "GBR"
    }

    fn document(&self) -> &'static str {
        "NINO"
    }

    fn normalize(&self, raw: &str) -> String {
        compact(raw, false)
    }

    fn decode(&self, id: &str) -> Result<Evidence, Problem> {
        let c: Vec<char> = id.chars().collect();
        if c.len() != 9 {
            return Err(Problem::Syntax(format!(
                "expected 9 characters, got {}",
                c.len()
            )));
        }
        if !c[..2].iter().all(|x| x.is_ascii_uppercase()) {
            return Err(Problem::Syntax("the prefix is two letters".into()));
        }
        if !c[2..8].iter().all(|x| x.is_ascii_digit()) {
            return Err(Problem::Syntax("six digits follow the prefix".into()));
        }
        if !matches!(c[8], 'A'..='D') {
            return Err(Problem::Syntax("the suffix is A, B, C or D".into()));
        }
        if let Some(p) = prefix_problem(&id[..2]) {
            return Err(Problem::Impossible(p));
        }
        Ok(evidence(self.document()))
    }

    /// An allowed prefix, six random digits and a random suffix. HMRC's example prefix QQ is
    /// guaranteed fictitious but fails validation, and no allocatable prefix is reserved, so a
    /// generated number may coincide with an issued one.
    fn generate(&self, _subject: &Subject, rng: &mut StageRng) -> String {
        let first: Vec<char> = ('A'..='Z').filter(|c| !NEVER_FIRST.contains(*c)).collect();
        let second: Vec<char> = ('A'..='Z').filter(|c| !NEVER_SECOND.contains(*c)).collect();
        let prefix = loop {
            let p: String = [*pick(rng, &first), *pick(rng, &second)].iter().collect();
            if prefix_problem(&p).is_none() {
                break p;
            }
        };
        let suffix = *pick(rng, &['A', 'B', 'C', 'D']);
        format!("{prefix}{}{suffix}", render(&random_digits(rng, 6)))
    }

    fn uncertainties(&self) -> &'static [&'static str] {
        &[
            "The 8-character form without suffix, accepted by some older systems, is rejected.",
            "No allocatable prefix is reserved for fiction (QQ is, but fails validation), so generated numbers may coincide with issued ones.",
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit;
    use super::*;

    #[test]
    fn accepts_well_formed_numbers() {
        assert_eq!(SCHEME.normalize("ab 12 34 56 c"), "AB123456C");
        for ok in ["AB123456C", "ZY000000A", "CE999999D", "NA123456B"] {
            assert_eq!(SCHEME.decode(ok), Ok(evidence("NINO")), "{ok}");
        }
    }

    #[test]
    fn hmrc_example_prefix_is_rejected() {
        assert!(matches!(
            SCHEME.decode("QQ123456C"),
            Err(Problem::Impossible(_))
        ));
    }

    #[test]
    fn rejects_forbidden_and_reserved_prefixes() {
        for p in [
            "DA", "FA", "IA", "QA", "UA", "VA", "AD", "AF", "AI", "AO", "AQ", "AU", "AV",
        ] {
            let id = format!("{p}123456A");
            assert!(
                matches!(SCHEME.decode(&id), Err(Problem::Impossible(_))),
                "{id}"
            );
        }
        for p in NOT_ALLOCATED.iter().chain(&ADMINISTRATIVE) {
            let id = format!("{p}123456A");
            assert!(
                matches!(SCHEME.decode(&id), Err(Problem::Impossible(_))),
                "{id}"
            );
        }
    }

    #[test]
    fn rejects_malformed_input() {
        for bad in [
            "AB123456",
            "AB123456CC",
            "AB12345CC",
            "A1123456C",
            "AB123456E",
            "12123456A",
            "AB 12 34 56 C",
        ] {
            assert!(
                matches!(SCHEME.decode(bad), Err(Problem::Syntax(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn generated_numbers_are_valid() {
        let mut rng = crate::seeding::rng(1, "test", "gbr");
        for s in testkit::subjects("GBR", &["ENG", "SCT"]) {
            for _ in 0..50 {
                let id = SCHEME.generate(&s, &mut rng);
                assert_eq!(SCHEME.decode(&id), Ok(evidence("NINO")), "{id}");
            }
        }
    }
}
