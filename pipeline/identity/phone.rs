//! Phone numbers: E.164, valid for the country by libphonenumber's metadata, and in a
//! mobile range (or a range where mobile and fixed lines share numbers, as in NANP).

use crate::seeding::StageRng;
use phonenumber::metadata::DATABASE;
use phonenumber::{Mode, Type};
use rand::Rng;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhoneEvidence {
    /// ISO 3166-1 alpha-2 region the number belongs to.
    pub region: String,
    pub kind: String,
}

/// Checks `raw` is a canonical E.164 mobile number of one of `regions` (alpha-2 codes).
pub fn check(raw: &str, regions: &[&str]) -> Result<PhoneEvidence, String> {
    let rest = raw
        .strip_prefix('+')
        .ok_or("not in E.164 form (must start with +)")?;
    if rest.is_empty() || rest.len() > 15 || !rest.bytes().all(|b| b.is_ascii_digit()) {
        return Err("not in E.164 form (+ and up to 15 digits)".into());
    }
    let n = phonenumber::parse(None, raw).map_err(|e| format!("cannot be parsed: {e}"))?;
    if !n.is_valid() {
        return Err("not a valid number for its country code".into());
    }
    if n.format().mode(Mode::E164).to_string() != raw {
        return Err("not in canonical E.164 form".into());
    }
    let region = n
        .country()
        .id()
        .map(|id| format!("{id:?}"))
        .unwrap_or_default();
    let kind = n.number_type(&DATABASE);
    if !matches!(kind, Type::Mobile | Type::FixedLineOrMobile) {
        return Err(format!("a {kind:?} number, not a mobile one"));
    }
    if !regions.iter().any(|r| r.eq_ignore_ascii_case(&region)) {
        return Err(format!(
            "belongs to {region}, expected {}",
            regions.join(" or ")
        ));
    }
    Ok(PhoneEvidence {
        region,
        kind: format!("{kind:?}"),
    })
}

/// A mobile number of `region` valid by construction: libphonenumber's example mobile
/// number with everything after its first three digits redrawn until the metadata accepts it.
pub fn generate(region: &str, rng: &mut StageRng) -> Option<String> {
    let meta = DATABASE.by_id(region)?;
    let code = meta.country_code();
    let example = meta.descriptors().mobile()?.example()?.to_string();
    let keep = example.len().min(3);
    for _ in 0..500 {
        let mut national = example[..keep].to_string();
        for _ in keep..example.len() {
            national.push(char::from(b'0' + rng.random_range(0..10u8)));
        }
        let candidate = format!("+{code}{national}");
        if check(&candidate, &[region]).is_ok() {
            return Some(candidate);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const REGIONS: [&str; 26] = [
        "US", "CN", "IN", "BR", "MX", "NG", "DE", "JP", "GB", "CA", "CO", "FR", "PL", "KR", "ID",
        "PH", "VN", "PK", "BD", "EG", "TR", "IR", "ET", "ZA", "KE", "AU",
    ];

    #[test]
    fn generated_numbers_are_valid_mobiles_of_their_country() {
        let mut r = crate::seeding::rng(1, "test", "phone");
        for reg in REGIONS {
            for _ in 0..20 {
                let p = generate(reg, &mut r).unwrap_or_else(|| panic!("no number for {reg}"));
                let ev = check(&p, &[reg]).unwrap_or_else(|e| panic!("{reg} {p}: {e}"));
                assert_eq!(ev.region, reg);
            }
        }
    }

    #[test]
    fn wrong_country_form_and_type_are_rejected() {
        let mut r = crate::seeding::rng(2, "test", "phone");
        let fr = generate("FR", &mut r).unwrap();
        assert!(check(&fr, &["DE"]).unwrap_err().contains("belongs to FR"));
        assert!(check(&fr[1..], &["FR"]).is_err());
        assert!(check("+33 6 12 34 56 78", &["FR"]).is_err());
        // A French fixed line (01...) is not a mobile.
        assert!(check("+33142685300", &["FR"])
            .unwrap_err()
            .contains("not a mobile"));
        assert!(check("+999123", &["FR"]).is_err());
    }
}
