//! Email addresses: a conservative syntax (the dot-atom subset of RFC 5322 that every mail
//! system accepts) on the domains RFC 2606 reserves for documentation, so no synthetic
//! address can reach a real mailbox.

pub const DOMAINS: [&str; 3] = ["example.com", "example.org", "example.net"];

pub fn check(raw: &str) -> Result<(), String> {
    let (local, domain) = raw.rsplit_once('@').ok_or("no @")?;
    if raw.matches('@').count() != 1 {
        return Err("more than one @".into());
    }
    if !DOMAINS.contains(&domain) {
        return Err(format!(
            "domain {domain:?} is not one of {}",
            DOMAINS.join(", ")
        ));
    }
    if local.is_empty() || local.len() > 64 {
        return Err("local part must have 1 to 64 characters".into());
    }
    if !local
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"._%+-".contains(&b))
    {
        return Err("local part has characters outside A-Z a-z 0-9 . _ % + -".into());
    }
    if local.starts_with('.') || local.ends_with('.') || local.contains("..") {
        return Err("local part has a leading, trailing or doubled dot".into());
    }
    Ok(())
}

/// Lower-cased key for case-insensitive uniqueness.
pub fn unique_key(raw: &str) -> String {
    raw.to_ascii_lowercase()
}

/// An address built from a name: ASCII letters of the name, a separator and a number.
pub fn from_name(given: &str, surname: &str, n: u32, domain: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .filter_map(|c| {
                let c = fold_ascii(c);
                c.is_ascii_alphanumeric().then(|| c.to_ascii_lowercase())
            })
            .collect()
    };
    let g = clean(given);
    let s = clean(surname);
    let local = match (g.is_empty(), s.is_empty()) {
        (false, false) => format!("{g}.{s}{n}"),
        (false, true) => format!("{g}{n}"),
        (true, false) => format!("{s}{n}"),
        (true, true) => format!("user{n}"),
    };
    format!("{local}@{domain}")
}

/// Strips common Latin diacritics (é → e, ł → l, ...); other characters are returned as is.
fn fold_ascii(c: char) -> char {
    const FROM: &str = "àáâãäåāăąçćčďđèéêëēėęěğìíîïīįıłńñňòóôõöøōőřśşšţťùúûüūůűųýÿźżžÀÁÂÃÄÅĀĂĄÇĆČĎĐÈÉÊËĒĖĘĚĞÌÍÎÏĪĮİŁŃÑŇÒÓÔÕÖØŌŐŘŚŞŠŢŤÙÚÛÜŪŮŰŲÝŸŹŻŽạảấầẩẫậắằẳẵặẹẻẽếềểễệỉịọỏốồổỗộớờởỡợụủứừửữựỳỵỷỹơư";
    const TO: &str = "aaaaaaaaacccddeeeeeeeegiiiiiiilnnnoooooooorsssttuuuuuuuuyyzzzAAAAAAAAACCCDDEEEEEEEEGIIIIIIILNNNOOOOOOOORSSSTTUUUUUUUUYYZZZaaaaaaaaaaaaeeeeeeeeiioooooooooooouuuuuuuyyyyou";
    FROM.chars()
        .position(|x| x == c)
        .and_then(|i| TO.chars().nth(i))
        .unwrap_or(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_reserved_domains_only_and_plain_local_parts() {
        assert!(check("ana.silva7@example.com").is_ok());
        assert!(check("ana.silva@gmail.com").is_err());
        assert!(check(".ana@example.org").is_err());
        assert!(check("ana..b@example.org").is_err());
        assert!(check("an a@example.org").is_err());
        assert!(check("a@b@example.org").is_err());
        assert_eq!(unique_key("Ana@Example.com"), unique_key("ana@example.com"));
    }

    #[test]
    fn addresses_from_names_are_valid() {
        for (g, s) in [
            ("José", "Núñez"),
            ("Łukasz", "Wróbel"),
            ("Nguyễn", "Thị"),
            ("李", "王"),
            ("", ""),
        ] {
            let e = from_name(g, s, 42, "example.net");
            assert!(check(&e).is_ok(), "{e}");
        }
        assert_eq!(
            from_name("José", "Núñez", 3, "example.com"),
            "jose.nunez3@example.com"
        );
    }
}
