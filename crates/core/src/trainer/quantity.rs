//! `resource.Quantity` as apimachinery's `ParseQuantity` reads it, so that two spellings of one
//! amount (`1Gi`, `1024Mi`, `1073741824`) compare equal, as `Quantity.Cmp` does in Kubernetes'
//! `equality.Semantic`. Like `ParseQuantity`, a non-zero amount is rounded up (away from zero) to a
//! whole number of nanos (`0.5n` is `1n`), and an amount with a binary suffix is capped at the
//! largest int64 (`8Ei` and `16Ei` are both 9223372036854775807).

/// An amount as `sign × mantissa × 10^exponent`, with the mantissa's trailing zeros moved into the
/// exponent (so each amount has one form; zero is `(false, 0, 0)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Amount {
    negative: bool,
    mantissa: u128,
    exponent: i32,
}

impl Amount {
    /// Parses Kubernetes' quantity syntax: a signed decimal number with an optional binary (`Ki`…
    /// `Ei`), decimal (`n`, `u`, `m`, `k`, `M`, `G`, `T`, `P`, `E`) or exponent (`e3`, `E-2`) suffix.
    /// `None` when the text is not a quantity, or too large to hold exactly.
    pub(crate) fn parse(text: &str) -> Option<Amount> {
        let (negative, rest) = match text.as_bytes().first()? {
            b'-' => (true, &text[1..]),
            b'+' => (false, &text[1..]),
            _ => (false, text),
        };
        let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(number_len);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
            return None;
        }
        let mut mantissa: u128 = 0;
        for d in whole.bytes().chain(fraction.bytes()) {
            mantissa = mantissa.checked_mul(10)?.checked_add(u128::from(d - b'0'))?;
        }
        let mut exponent = -i32::try_from(fraction.len()).ok()?;
        let binary = |power: u32| 1u128.checked_shl(10 * power);
        let binary_suffix = matches!(suffix, "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei");
        match suffix {
            "" => {}
            "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => {
                let power = "KMGTPE".find(&suffix[..1])? as u32 + 1;
                mantissa = mantissa.checked_mul(binary(power)?)?;
            }
            "n" => exponent -= 9,
            "u" => exponent -= 6,
            "m" => exponent -= 3,
            "k" => exponent += 3,
            "M" => exponent += 6,
            "G" => exponent += 9,
            "T" => exponent += 12,
            "P" => exponent += 15,
            "E" => exponent += 18,
            _ => {
                let digits = suffix.strip_prefix(['e', 'E'])?;
                let digits_only = digits.strip_prefix(['+', '-']).unwrap_or(digits);
                if digits_only.is_empty() || !digits_only.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                exponent = exponent.checked_add(digits.parse::<i32>().ok()?)?;
            }
        }
        if mantissa == 0 {
            return Some(Amount { negative: false, mantissa: 0, exponent: 0 });
        }
        // Round the magnitude up to whole nanos.
        if exponent < -9 {
            let shift = u32::try_from(-9 - i64::from(exponent)).ok()?;
            mantissa = match 10u128.checked_pow(shift) {
                Some(d) => mantissa.div_ceil(d),
                // More than 38 places below a nano: the smallest non-zero amount.
                None => 1,
            };
            exponent = -9;
        }
        if binary_suffix && exceeds_int64(mantissa, exponent) {
            mantissa = i64::MAX as u128;
            exponent = 0;
        }
        while mantissa.is_multiple_of(10) {
            mantissa /= 10;
            exponent += 1;
        }
        Some(Amount { negative, mantissa, exponent })
    }
}

/// Whether `mantissa × 10^exponent` is above the largest int64.
fn exceeds_int64(mantissa: u128, exponent: i32) -> bool {
    let max = i64::MAX as u128;
    if exponent >= 0 {
        return 10u128
            .checked_pow(exponent.unsigned_abs())
            .and_then(|p| mantissa.checked_mul(p))
            .is_none_or(|v| v > max);
    }
    match 10u128.checked_pow(exponent.unsigned_abs()) {
        // Whole part above the max, or equal to it with a fraction.
        Some(d) => mantissa / d > max || (mantissa / d == max && !mantissa.is_multiple_of(d)),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::Amount;

    #[test]
    fn spellings_of_one_amount_are_equal() {
        let same = [
            ("1Gi", "1024Mi"),
            ("1Gi", "1073741824"),
            ("1.5Gi", "1536Mi"),
            ("500m", "0.5"),
            ("1k", "1000"),
            ("1e3", "1k"),
            ("0", "0Gi"),
            ("-0", "0m"),
            ("100M", "0.1G"),
            ("1", "+1"),
            ("2E-3", "2m"),
            // ParseQuantity rounds up to whole nanos and caps binary-suffix amounts at int64.
            ("0.5n", "1n"),
            ("-0.5n", "-1n"),
            ("1.0000000001", "1.000000001"),
            ("1e-30", "1n"),
            ("8Ei", "16Ei"),
            ("8Ei", "9223372036854775807"),
        ];
        for (a, b) in same {
            assert_eq!(Amount::parse(a), Amount::parse(b), "{a} = {b}");
            assert!(Amount::parse(a).is_some(), "{a}");
        }
    }

    #[test]
    fn different_amounts_differ_and_non_quantities_fail() {
        for (a, b) in [("1Gi", "1G"), ("1", "-1"), ("1m", "1"), ("1.5", "15"), ("1n", "2n"), ("8E", "16E")] {
            assert_ne!(Amount::parse(a), Amount::parse(b), "{a} ≠ {b}");
        }
        for bad in ["", "Gi", "1.2.3", "1 Gi", "1GiB", "abc", "1e", "1e+", ".", "1x"] {
            assert_eq!(Amount::parse(bad), None, "{bad:?}");
        }
    }
}
