//! Mexico: CURP (Clave Única de Registro de Población), 18 upper-case characters:
//!
//! | positions | content |
//! |---|---|
//! | 1-4 | paternal surname initial and first internal vowel, maternal surname initial, given-name initial |
//! | 5-10 | birth date `YYMMDD` |
//! | 11 | sex, `H` (hombre) or `M` (mujer) |
//! | 12-13 | birth state, `NE` for born abroad |
//! | 14-16 | first internal consonants of paternal surname, maternal surname, given name |
//! | 17 | disambiguator: a digit for births up to 1999, a letter from 2000 |
//! | 18 | check digit |

use super::{compact, evidence, pick};
use crate::identity::govid::{Date, Evidence, Problem, Scheme, Sex, Subject};
use crate::seeding::StageRng;
use rand::Rng;

pub struct Curp;

pub static SCHEME: Curp = Curp;

/// Birth-state codes; `NE` (nacido en el extranjero) is born abroad.
const STATES: [&str; 33] = [
    "AS", "BC", "BS", "CC", "CL", "CM", "CS", "CH", "DF", "DG", "GT", "GR", "HG", "JC", "MC", "MN",
    "MS", "NT", "NL", "OC", "PL", "QT", "QR", "SP", "SL", "SR", "TC", "TS", "TL", "VZ", "YN", "ZS",
    "NE",
];

/// GeoNames admin1 code of a Mexican state (01-32, alphabetical by state name) → CURP code.
const STATE_BY_ADMIN1: [(&str, &str); 32] = [
    ("01", "AS"), // Aguascalientes
    ("02", "BC"), // Baja California
    ("03", "BS"), // Baja California Sur
    ("04", "CC"), // Campeche
    ("05", "CS"), // Chiapas
    ("06", "CH"), // Chihuahua
    ("07", "CL"), // Coahuila
    ("08", "CM"), // Colima
    ("09", "DF"), // Ciudad de México
    ("10", "DG"), // Durango
    ("11", "GT"), // Guanajuato
    ("12", "GR"), // Guerrero
    ("13", "HG"), // Hidalgo
    ("14", "JC"), // Jalisco
    ("15", "MC"), // Estado de México
    ("16", "MN"), // Michoacán
    ("17", "MS"), // Morelos
    ("18", "NT"), // Nayarit
    ("19", "NL"), // Nuevo León
    ("20", "OC"), // Oaxaca
    ("21", "PL"), // Puebla
    ("22", "QT"), // Querétaro
    ("23", "QR"), // Quintana Roo
    ("24", "SP"), // San Luis Potosí
    ("25", "SL"), // Sinaloa
    ("26", "SR"), // Sonora
    ("27", "TC"), // Tabasco
    ("28", "TS"), // Tamaulipas
    ("29", "TL"), // Tlaxcala
    ("30", "VZ"), // Veracruz
    ("31", "YN"), // Yucatán
    ("32", "ZS"), // Zacatecas
];

/// Four-letter words that may not open a CURP; the second letter is then replaced by `X`.
const FORBIDDEN: [&str; 81] = [
    "BACA", "BAKA", "BUEI", "BUEY", "CACA", "CACO", "CAGA", "CAGO", "CAKA", "CAKO", "COGE", "COGI",
    "COJA", "COJE", "COJI", "COJO", "COLA", "CULO", "FALO", "FETO", "GETA", "GUEI", "GUEY", "JETA",
    "JOTO", "KACA", "KACO", "KAGA", "KAGO", "KAKA", "KAKO", "KOGE", "KOGI", "KOJA", "KOJE", "KOJI",
    "KOJO", "KOLA", "KULO", "LILO", "LOCA", "LOCO", "LOKA", "LOKO", "MAME", "MAMO", "MEAR", "MEAS",
    "MEON", "MIAR", "MION", "MOCO", "MOKO", "MULA", "MULO", "NACA", "NACO", "PEDA", "PEDO", "PENE",
    "PIPI", "PITO", "POPO", "PUTA", "PUTO", "QULO", "RATA", "ROBA", "ROBE", "ROBO", "RUIN", "SENO",
    "TETA", "VACA", "VAGA", "VAGO", "VAKA", "VUEI", "VUEY", "WUEI", "WUEY",
];

/// CURP code of the state for a GeoNames admin1 code of Mexico.
pub fn state_for_admin1(admin1: &str) -> Option<&'static str> {
    STATE_BY_ADMIN1
        .iter()
        .find(|(a, _)| *a == admin1)
        .map(|(_, s)| *s)
}

fn is_vowel(c: char) -> bool {
    matches!(c, 'A' | 'E' | 'I' | 'O' | 'U')
}

fn is_consonant(c: char) -> bool {
    c.is_ascii_uppercase() && !is_vowel(c)
}

/// Value of a character in the check-digit alphabet `0-9 A-N Ñ O-Z`.
fn value(c: char) -> Option<u32> {
    match c {
        '0'..='9' => c.to_digit(10),
        'A'..='N' => Some(10 + (c as u32 - 'A' as u32)),
        'Ñ' => Some(24),
        'O'..='Z' => Some(25 + (c as u32 - 'O' as u32)),
        _ => None,
    }
}

/// Check digit over the first 17 characters: weights 18 down to 2, then (10 − S mod 10) mod 10.
fn check_digit(first17: &[char]) -> Option<u32> {
    let mut sum = 0;
    for (i, &c) in first17.iter().enumerate() {
        sum += value(c)? * (18 - i as u32);
    }
    Some((10 - sum % 10) % 10)
}

/// Upper-case ASCII letters of a name part: accents dropped, `Ñ` written `X`, anything else
/// removed.
fn fold(word: &str) -> String {
    word.chars()
        .flat_map(char::to_uppercase)
        .filter_map(|c| match c {
            'A'..='Z' => Some(c),
            'Á' | 'À' | 'Â' | 'Ä' | 'Ã' => Some('A'),
            'É' | 'È' | 'Ê' | 'Ë' => Some('E'),
            'Í' | 'Ì' | 'Î' | 'Ï' => Some('I'),
            'Ó' | 'Ò' | 'Ô' | 'Ö' | 'Õ' => Some('O'),
            'Ú' | 'Ù' | 'Û' | 'Ü' => Some('U'),
            'Ñ' => Some('X'),
            'Ç' => Some('C'),
            _ => None,
        })
        .collect()
}

fn words(s: &str) -> Vec<String> {
    s.split(|c: char| c.is_whitespace() || c == '-')
        .map(fold)
        .filter(|w| !w.is_empty())
        .collect()
}

/// First letter after the initial one that satisfies `pred`, or `X`.
fn internal(word: Option<&String>, pred: fn(char) -> bool) -> char {
    word.and_then(|w| w.chars().skip(1).find(|&c| pred(c)))
        .unwrap_or('X')
}

fn initial(word: Option<&String>) -> char {
    word.and_then(|w| w.chars().next()).unwrap_or('X')
}

/// The seven name-derived letters of a CURP, as `decode` reports them in `name_letters`:
/// positions 1-4 followed by positions 14-16.
///
/// The first word of `surname` is the paternal surname and the second, if any, the maternal
/// one. A leading given name José or María is skipped when a second given name follows.
pub fn name_letters(given_name: &str, surname: &str) -> String {
    let surnames = words(surname);
    let givens = words(given_name);
    let paternal = surnames.first();
    let maternal = surnames.get(1);
    let given = match givens.as_slice() {
        [first, second, ..] if first == "JOSE" || first == "MARIA" => Some(second),
        other => other.first(),
    };
    let mut head: Vec<char> = vec![
        initial(paternal),
        internal(paternal, is_vowel),
        initial(maternal),
        initial(given),
    ];
    let word: String = head.iter().collect();
    if FORBIDDEN.contains(&word.as_str()) {
        head[1] = 'X';
    }
    head.into_iter()
        .chain([
            internal(paternal, is_consonant),
            internal(maternal, is_consonant),
            internal(given, is_consonant),
        ])
        .collect()
}

fn layout(c: &[char]) -> Result<(), Problem> {
    let bad = |what: &str| Err(Problem::Syntax(what.to_string()));
    if c.len() != 18 {
        return Err(Problem::Syntax(format!(
            "expected 18 characters, got {}",
            c.len()
        )));
    }
    if !c[0].is_ascii_uppercase() || !(is_vowel(c[1]) || c[1] == 'X') {
        return bad("positions 1-2 must be a letter and a vowel or X");
    }
    if !c[2..4].iter().all(|x| x.is_ascii_uppercase()) {
        return bad("positions 3-4 must be letters");
    }
    if !c[4..10].iter().all(|x| x.is_ascii_digit()) {
        return bad("positions 5-10 must be the birth date YYMMDD");
    }
    if !matches!(c[10], 'H' | 'M') {
        return bad("position 11 must be H or M");
    }
    if !c[11..13].iter().all(|x| x.is_ascii_uppercase()) {
        return bad("positions 12-13 must be a state code");
    }
    if !c[13..16].iter().all(|&x| is_consonant(x)) {
        return bad("positions 14-16 must be consonants");
    }
    if !(c[16].is_ascii_digit() || c[16].is_ascii_uppercase()) {
        return bad("position 17 must be a digit or a letter");
    }
    if !c[17].is_ascii_digit() {
        return bad("position 18 must be a digit");
    }
    Ok(())
}

fn two(c: &[char]) -> u32 {
    c[0].to_digit(10).unwrap_or(0) * 10 + c[1].to_digit(10).unwrap_or(0)
}

impl Scheme for Curp {
    fn iso3(&self) -> &'static str {
        "MEX"
    }

    fn document(&self) -> &'static str {
        "CURP"
    }

    fn normalize(&self, raw: &str) -> String {
        compact(raw, false)
    }

    fn decode(&self, id: &str) -> Result<Evidence, Problem> {
        let c: Vec<char> = id.chars().collect();
        layout(&c)?;
        let expected = check_digit(&c[..17]).expect("layout admits only alphabet characters");
        let found = c[17].to_digit(10).expect("layout checked a digit");
        if expected != found {
            return Err(Problem::CheckDigit(format!(
                "expected {expected}, found {found}"
            )));
        }
        let head: String = c[..4].iter().collect();
        if FORBIDDEN.contains(&head.as_str()) {
            return Err(Problem::Impossible(format!(
                "{head} is never used as the name part"
            )));
        }
        let state: String = c[11..13].iter().collect();
        if !STATES.contains(&state.as_str()) {
            return Err(Problem::Impossible(format!("unknown state code {state}")));
        }
        let century = if c[16].is_ascii_digit() { 1900 } else { 2000 };
        let year = century + two(&c[4..6]) as i32;
        let birth = Date::new(year, two(&c[6..8]), two(&c[8..10]))
            .ok_or_else(|| Problem::InvalidDate(c[4..10].iter().collect()))?;
        let mut ev = evidence(self.document());
        ev.birth_date = Some(birth);
        ev.sex = Some(if c[10] == 'H' { Sex::Male } else { Sex::Female });
        ev.born_abroad = Some(state == "NE");
        ev.region = Some(state);
        ev.name_letters = Some(c[..4].iter().chain(&c[13..16]).collect());
        Ok(ev)
    }

    /// Name letters, birth date and sex from the subject; state `NE` when born outside
    /// Mexico, the birth state when its admin1 code is known, otherwise a state drawn from
    /// the rng; a random disambiguator of the right kind for the century. No range is
    /// reserved for fiction, so a generated CURP may coincide with an issued one. Births
    /// outside 1900-2099 cannot be represented (the century is only implied).
    fn generate(&self, subject: &Subject, rng: &mut StageRng) -> String {
        let letters: Vec<char> = name_letters(subject.given_name, subject.surname)
            .chars()
            .collect();
        let b = subject.birth_date;
        let state = if subject.birth_country_iso3 != "MEX" {
            "NE"
        } else {
            subject
                .birth_admin1
                .and_then(state_for_admin1)
                .unwrap_or_else(|| pick(rng, &STATE_BY_ADMIN1).1)
        };
        let sex = match subject.sex {
            Sex::Male => 'H',
            Sex::Female => 'M',
        };
        let disambiguator = if b.year < 2000 {
            char::from_digit(rng.random_range(0..10u32), 10).expect("digit")
        } else {
            char::from(b'A' + rng.random_range(0..26u8))
        };
        let mut s: String = letters[..4].iter().collect();
        s.push_str(&format!(
            "{:02}{:02}{:02}{sex}{state}",
            b.year.rem_euclid(100),
            b.month,
            b.day
        ));
        s.extend(&letters[4..]);
        s.push(disambiguator);
        let chars: Vec<char> = s.chars().collect();
        let check = check_digit(&chars).expect("generated characters are in the alphabet");
        s.push(char::from_digit(check, 10).expect("digit"));
        s
    }

    fn uncertainties(&self) -> &'static [&'static str] {
        &[
            "A non-binary sex marker reportedly used in recent records is unconfirmed; only H and M are accepted.",
            "Name particles (DE, DEL, LA, ...) and abbreviated given names are not skipped, since the reference does not document those rules; the surname's first word is taken as the paternal surname.",
            "No range is reserved for fiction, so generated CURPs may coincide with issued ones.",
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{self, substitutions};
    use super::*;

    const ALPHABET: &str = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";

    #[test]
    fn reference_specimens_decode() {
        let ev = SCHEME.decode("BOXW310820HNERXN09").unwrap();
        assert_eq!(ev.birth_date, Date::new(1931, 8, 20));
        assert_eq!(ev.sex, Some(Sex::Male));
        assert_eq!(ev.region.as_deref(), Some("NE"));
        assert_eq!(ev.born_abroad, Some(true));
        assert_eq!(ev.name_letters.as_deref(), Some("BOXWRXN"));

        assert_eq!(SCHEME.normalize("aapr630321hdflrc09"), "AAPR630321HDFLRC09");
        let ev = SCHEME.decode("AAPR630321HDFLRC09").unwrap();
        assert_eq!(ev.birth_date, Date::new(1963, 3, 21));
        assert_eq!(ev.sex, Some(Sex::Male));
        assert_eq!(ev.region.as_deref(), Some("DF"));
        assert_eq!(ev.born_abroad, Some(false));
        assert_eq!(ev.name_letters.as_deref(), Some("AAPRLRC"));
        assert_eq!(name_letters("Ricardo", "Álvarez Pérez"), "AAPRLRC");
    }

    #[test]
    fn check_digit_sums_match_the_reference() {
        let chars: Vec<char> = "BOXW310820HNERXN0".chars().collect();
        assert_eq!(check_digit(&chars), Some(9));
        let s: u32 = chars
            .iter()
            .enumerate()
            .map(|(i, &c)| value(c).unwrap() * (18 - i as u32))
            .sum();
        assert_eq!(s, 2551);
        let chars: Vec<char> = "AAPR630321HDFLRC0".chars().collect();
        let s: u32 = chars
            .iter()
            .enumerate()
            .map(|(i, &c)| value(c).unwrap() * (18 - i as u32))
            .sum();
        assert_eq!(s, 1941);
        assert_eq!(value('N'), Some(23));
        assert_eq!(value('Ñ'), Some(24));
        assert_eq!(value('O'), Some(25));
        assert_eq!(value('Z'), Some(36));
    }

    /// Replacing the character at position `i` (weight 18 − i) by one whose value differs by
    /// Δ shifts the sum by weight × Δ; the check digit cannot see it when that is a multiple
    /// of 10: weight 10 (index 8) always, even weights when Δ is a multiple of 5, weights
    /// 15 and 5 when Δ is even, the other odd weights when Δ is a multiple of 10. The layout,
    /// date, state and word rules still reject many of those; the rest are accepted.
    fn invisible_to_check(id: &str, pos: usize, new: char) -> bool {
        if pos == 17 {
            return false;
        }
        let old = value(id.chars().nth(pos).unwrap()).unwrap() as i64;
        let weight = 18 - pos as i64;
        (weight * (value(new).unwrap() as i64 - old)).rem_euclid(10) == 0
    }

    #[test]
    fn single_substitutions_are_rejected_unless_invisible_to_the_check_digit() {
        let spec = "AAPR630321HDFLRC09";
        let mut accepted = Vec::new();
        for (i, c, m) in substitutions(spec, ALPHABET) {
            if SCHEME.decode(&m).is_ok() {
                assert!(invisible_to_check(spec, i, c), "{m}");
                accepted.push(m);
            }
        }
        // Exactly these survive, by position (0-based) and replacement: every one is a
        // weight × Δ ≡ 0 (mod 10) change that also keeps the layout, date and state valid.
        // Among them: 630321 -> 130321 (weight 14, Δ = 5), the day's tens digit (weight 10)
        // to 0, 1 or 3, the sex H -> M (weight 8, Δ = 5) and the disambiguator 0 -> A
        // (weight 2, Δ = 10), which moves the birth to 2063.
        let expected: [(usize, &str); 10] = [
            (0, "FKOTY"),
            (2, "BGLUZ"),
            (3, "ACEGIKMPTVXZ"),
            (4, "1"),
            (8, "013"),
            (10, "M"),
            (13, "BDFHJNQSWY"),
            (14, "DNW"),
            (15, "MV"),
            (16, "5AFKOTY"),
        ];
        let mut want = Vec::new();
        for (pos, chars) in expected {
            for c in chars.chars() {
                let mut m: Vec<char> = spec.chars().collect();
                m[pos] = c;
                want.push(m.into_iter().collect::<String>());
            }
        }
        assert_eq!(accepted, want);

        let mut rng = crate::seeding::rng(1, "test", "mex-subst");
        for s in testkit::subjects("MEX", &["09", "19"]) {
            let id = SCHEME.generate(&s, &mut rng);
            for (i, c, m) in substitutions(&id, ALPHABET) {
                if SCHEME.decode(&m).is_ok() {
                    assert!(invisible_to_check(&id, i, c), "{id} -> {m}");
                }
            }
        }
    }

    #[test]
    fn century_comes_from_the_disambiguator() {
        for (body, year) in [("GOLM050228MJCMRRA", 2005), ("GOLM050228MJCMRR5", 1905)] {
            let chars: Vec<char> = body.chars().collect();
            let id = format!("{body}{}", check_digit(&chars).unwrap());
            let ev = SCHEME.decode(&id).unwrap();
            assert_eq!(ev.birth_date, Date::new(year, 2, 28), "{id}");
            assert_eq!(ev.sex, Some(Sex::Female));
            assert_eq!(ev.region.as_deref(), Some("JC"));
        }
    }

    #[test]
    fn name_letters_follow_the_documented_rules() {
        assert_eq!(name_letters("José Luis", "Hernández García"), "HEGLRRS");
        assert_eq!(name_letters("María", "Núñez"), "NUXMXXR");
        assert_eq!(name_letters("Ana", "Muñoz"), "MUXAXXN");
        // PEDO is forbidden: the second letter becomes X.
        assert_eq!(name_letters("Olga", "Pérez Domínguez"), "PXDORML");
    }

    #[test]
    fn rejects_malformed_input_and_impossible_values() {
        let fix = |body: &str| {
            let chars: Vec<char> = body.chars().collect();
            format!("{body}{}", check_digit(&chars).unwrap())
        };
        for bad in [
            "AAPR630321HDFLRC0",
            "AAPR630321HDFLRC090",
            "ABPR630321HDFLRC09",
            "AAPR63O321HDFLRC09",
            "AAPR630321XDFLRC09",
            "AAPR630321HDFLAC09",
            "AAPR630321HDFLRC0A",
        ] {
            assert!(
                matches!(SCHEME.decode(bad), Err(Problem::Syntax(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            SCHEME.decode("AAPR630321HDFLRC08"),
            Err(Problem::CheckDigit(_))
        ));
        for bad in [
            fix("AAPR630231HDFLRC0"),
            fix("AAPR631321HDFLRC0"),
            fix("AAPR010229HDFLRCA"),
        ] {
            assert!(
                matches!(SCHEME.decode(&bad), Err(Problem::InvalidDate(_))),
                "{bad}"
            );
        }
        for bad in [fix("AAPR630321HZZLRC0"), fix("PEDO630321HDFLRC0")] {
            assert!(
                matches!(SCHEME.decode(&bad), Err(Problem::Impossible(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn generated_curps_agree_with_the_subject() {
        let mut rng = crate::seeding::rng(1, "test", "mex");
        let admin1: Vec<&str> = STATE_BY_ADMIN1.iter().map(|(a, _)| *a).collect();
        for s in testkit::subjects("MEX", &admin1) {
            let id = SCHEME.generate(&s, &mut rng);
            let ev = SCHEME.decode(&id).unwrap();
            assert_eq!(ev.birth_date, Some(s.birth_date), "{id}");
            assert_eq!(ev.sex, Some(s.sex));
            assert_eq!(ev.name_letters, Some(name_letters(s.given_name, s.surname)));
            assert_eq!(ev.born_abroad, Some(s.birth_country_iso3 != "MEX"));
            if let Some(a) = s.birth_admin1 {
                assert_eq!(ev.region.as_deref(), state_for_admin1(a));
            }
        }
        let s = testkit::subject(
            "María José",
            "de la Peña",
            Sex::Female,
            (2003, 7, 9),
            "MEX",
            Some("14"),
        );
        let id = SCHEME.generate(&s, &mut rng);
        let ev = SCHEME.decode(&id).unwrap();
        assert_eq!(ev.region.as_deref(), Some("JC"));
        assert_eq!(&id[4..13], "030709MJC");
        assert!(id.as_bytes()[16].is_ascii_uppercase());
    }
}
