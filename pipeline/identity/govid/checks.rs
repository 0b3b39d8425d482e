//! Check-digit algorithms shared by several identifier schemes.

/// Digits of a string, or `None` if any character is not an ASCII digit.
pub fn digits(s: &str) -> Option<Vec<u32>> {
    s.chars().map(|c| c.to_digit(10)).collect()
}

/// Luhn check digit for a payload of digits.
pub fn luhn_digit(payload: &[u32]) -> u32 {
    let mut sum = 0;
    // Rightmost payload digit is doubled (it sits left of the check digit).
    for (i, &d) in payload.iter().rev().enumerate() {
        let v = if i % 2 == 0 {
            let x = d * 2;
            if x > 9 {
                x - 9
            } else {
                x
            }
        } else {
            d
        };
        sum += v;
    }
    (10 - sum % 10) % 10
}

pub fn luhn_valid(all: &[u32]) -> bool {
    match all.split_last() {
        Some((&check, payload)) => luhn_digit(payload) == check,
        None => false,
    }
}

const VERHOEFF_D: [[u8; 10]; 10] = [
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
    [1, 2, 3, 4, 0, 6, 7, 8, 9, 5],
    [2, 3, 4, 0, 1, 7, 8, 9, 5, 6],
    [3, 4, 0, 1, 2, 8, 9, 5, 6, 7],
    [4, 0, 1, 2, 3, 9, 5, 6, 7, 8],
    [5, 9, 8, 7, 6, 0, 4, 3, 2, 1],
    [6, 5, 9, 8, 7, 1, 0, 4, 3, 2],
    [7, 6, 5, 9, 8, 2, 1, 0, 4, 3],
    [8, 7, 6, 5, 9, 3, 2, 1, 0, 4],
    [9, 8, 7, 6, 5, 4, 3, 2, 1, 0],
];
const VERHOEFF_P: [[u8; 10]; 8] = [
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
    [1, 5, 7, 6, 2, 8, 3, 0, 9, 4],
    [5, 8, 0, 3, 7, 9, 6, 1, 4, 2],
    [8, 9, 1, 6, 0, 4, 3, 5, 2, 7],
    [9, 4, 5, 3, 1, 2, 6, 8, 7, 0],
    [4, 2, 8, 6, 5, 7, 3, 9, 0, 1],
    [2, 7, 9, 3, 8, 0, 6, 4, 1, 5],
    [7, 0, 4, 6, 9, 1, 3, 2, 5, 8],
];
const VERHOEFF_INV: [u8; 10] = [0, 4, 3, 2, 1, 5, 6, 7, 8, 9];

pub fn verhoeff_valid(all: &[u32]) -> bool {
    let mut c = 0usize;
    for (i, &x) in all.iter().rev().enumerate() {
        c = VERHOEFF_D[c][VERHOEFF_P[i % 8][x as usize] as usize] as usize;
    }
    c == 0 && !all.is_empty()
}

pub fn verhoeff_digit(payload: &[u32]) -> u32 {
    let mut c = 0usize;
    for (i, &x) in payload.iter().rev().enumerate() {
        c = VERHOEFF_D[c][VERHOEFF_P[(i + 1) % 8][x as usize] as usize] as usize;
    }
    VERHOEFF_INV[c] as u32
}

/// ISO 7064 MOD 11-2: check value 0..=10 (10 is written `X`).
pub fn iso7064_mod11_2(payload: &[u32]) -> u32 {
    let mut p = 0u32;
    for &d in payload {
        p = ((p + d) * 2) % 11;
    }
    (12 - p % 11) % 11
}

/// ISO 7064 MOD 11,10 (hybrid).
pub fn iso7064_mod11_10(payload: &[u32]) -> u32 {
    let mut product = 10u32;
    for &d in payload {
        let mut s = (d + product) % 10;
        if s == 0 {
            s = 10;
        }
        product = (2 * s) % 11;
    }
    (11 - product) % 10
}

/// Sum of digit × weight.
pub fn weighted_sum(d: &[u32], w: &[u32]) -> u32 {
    d.iter().zip(w).map(|(a, b)| a * b).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // Luhn: 7992739871 -> 3 (classic example).
        assert_eq!(luhn_digit(&digits("7992739871").unwrap()), 3);
        assert!(luhn_valid(&digits("79927398713").unwrap()));
        // Verhoeff: 236 -> 3.
        assert_eq!(verhoeff_digit(&digits("236").unwrap()), 3);
        assert!(verhoeff_valid(&digits("2363").unwrap()));
        assert!(!verhoeff_valid(&digits("2364").unwrap()));
        // ISO 7064 MOD 11-2: "0794" -> 0 (ISO example), and the CN specimen 11010519491231002X.
        assert_eq!(iso7064_mod11_2(&digits("0794").unwrap()), 0);
        assert_eq!(iso7064_mod11_2(&digits("11010519491231002").unwrap()), 10);
    }

    #[test]
    fn every_single_digit_change_breaks_luhn_and_verhoeff() {
        let base = digits("79927398713").unwrap();
        for i in 0..base.len() {
            for v in 0..10 {
                if v == base[i] {
                    continue;
                }
                let mut m = base.clone();
                m[i] = v;
                assert!(!luhn_valid(&m));
            }
        }
        let mut payload = digits("12345678901").unwrap();
        payload.push(verhoeff_digit(&payload));
        for i in 0..payload.len() {
            for v in 0..10 {
                if v != payload[i] {
                    let mut m = payload.clone();
                    m[i] = v;
                    assert!(!verhoeff_valid(&m));
                }
            }
        }
    }
}
