//! Text helpers shared by the identifier schemes.

use super::{checks, Problem};

/// The compact form of an identifier: whitespace, `-`, `.` and `/` removed, letters
/// upper-cased and, when `local_digits` is set, Arabic-Indic (U+0660..U+0669) and Persian
/// (U+06F0..U+06F9) digits mapped to ASCII.
pub(crate) fn compact(raw: &str, local_digits: bool) -> String {
    raw.chars()
        .filter(|c| !c.is_whitespace() && !matches!(c, '-' | '.' | '/'))
        .map(|c| match c {
            '\u{0660}'..='\u{0669}' if local_digits => char::from(b'0' + (c as u32 - 0x0660) as u8),
            '\u{06F0}'..='\u{06F9}' if local_digits => char::from(b'0' + (c as u32 - 0x06F0) as u8),
            _ => c,
        })
        .flat_map(char::to_uppercase)
        .collect()
}

/// The digits of an identifier that must consist of exactly `len` ASCII digits.
pub(crate) fn exact_digits(id: &str, len: usize) -> Result<Vec<u32>, Problem> {
    let n = id.chars().count();
    if n != len {
        return Err(Problem::Syntax(format!(
            "expected {len} digits, got {n} characters"
        )));
    }
    checks::digits(id).ok_or_else(|| Problem::Syntax("only digits are allowed".into()))
}

/// The number written by a run of decimal digits, most significant first.
pub(crate) fn number(d: &[u32]) -> u32 {
    d.iter().fold(0, |acc, &x| acc * 10 + x)
}
