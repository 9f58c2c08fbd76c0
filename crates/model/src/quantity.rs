//! Kubernetes resource quantities, parsed exactly (never through floating point).
//!
//! Grammar (from `k8s.io/apimachinery/pkg/api/resource`):
//! `<sign><digits>[.<digits>]<suffix>` where the suffix is a binary SI suffix
//! (`Ki Mi Gi Ti Pi Ei`), a decimal SI suffix (`n u m "" k M G T P E`) or a decimal
//! exponent (`e3`, `E-2`). Conversions to integers round up, as Kubernetes does.

use thiserror::Error;

/// An exact quantity: `mantissa * 10^exp10 * 2^pow2`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantity {
    mantissa: i128,
    exp10: i32,
    pow2: u32,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum QuantityError {
    #[error(
        "quantity {0:?} is not a valid Kubernetes quantity (expected e.g. 100m, 1.5, 2Gi, 1e3)"
    )]
    Syntax(String),
    #[error("quantity {0:?} is too large")]
    Overflow(String),
}

impl Quantity {
    /// Parses a quantity string such as `100m`, `1.5`, `2Gi`, `1e3`.
    pub fn parse(text: &str) -> Result<Quantity, QuantityError> {
        let syntax = || QuantityError::Syntax(text.to_string());
        let s = text.trim();
        if s.is_empty() {
            return Err(syntax());
        }
        let bytes = s.as_bytes();
        let mut i = 0;
        let mut negative = false;
        if bytes[0] == b'+' || bytes[0] == b'-' {
            negative = bytes[0] == b'-';
            i = 1;
        }
        let mut mantissa: i128 = 0;
        let mut exp10: i32 = 0;
        let mut digits = 0usize;
        let mut seen_dot = false;
        while i < bytes.len() {
            let c = bytes[i];
            if c.is_ascii_digit() {
                digits += 1;
                // Keep at most 30 significant digits; further digits only change the exponent.
                if mantissa < 10i128.pow(30) {
                    mantissa = mantissa * 10 + i128::from(c - b'0');
                    if seen_dot {
                        exp10 -= 1;
                    }
                } else if !seen_dot {
                    exp10 += 1;
                } else if c != b'0' {
                    // Sub-precision digits beyond 30 significant digits: round up by one ulp.
                    mantissa += 1;
                }
            } else if c == b'.' && !seen_dot {
                seen_dot = true;
            } else {
                break;
            }
            i += 1;
        }
        if digits == 0 {
            return Err(syntax());
        }
        let suffix = &s[i..];
        let mut pow2 = 0u32;
        match suffix {
            "" => {}
            "Ki" => pow2 = 10,
            "Mi" => pow2 = 20,
            "Gi" => pow2 = 30,
            "Ti" => pow2 = 40,
            "Pi" => pow2 = 50,
            "Ei" => pow2 = 60,
            "n" => exp10 -= 9,
            "u" => exp10 -= 6,
            "m" => exp10 -= 3,
            "k" => exp10 += 3,
            "M" => exp10 += 6,
            "G" => exp10 += 9,
            "T" => exp10 += 12,
            "P" => exp10 += 15,
            "E" => exp10 += 18,
            _ => {
                let rest = suffix
                    .strip_prefix('e')
                    .or_else(|| suffix.strip_prefix('E'))
                    .ok_or_else(syntax)?;
                let body = rest.strip_prefix(['+', '-']).unwrap_or(rest);
                if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(syntax());
                }
                let e: i32 = rest.parse().map_err(|_| syntax())?;
                if e.abs() > 100 {
                    return Err(QuantityError::Overflow(text.to_string()));
                }
                exp10 += e;
            }
        }
        if negative {
            mantissa = -mantissa;
        }
        Ok(Quantity {
            mantissa,
            exp10,
            pow2,
        })
    }

    pub fn is_negative(&self) -> bool {
        self.mantissa < 0
    }

    /// The value scaled by `10^scale`, rounded up (towards positive infinity), as Kubernetes'
    /// `ScaledValue` does. `None` when it does not fit in an `i64`.
    pub fn scaled_ceil(&self, scale: i32) -> Option<i64> {
        if self.mantissa == 0 {
            return Some(0);
        }
        let mut num: i128 = self.mantissa;
        let mut den: i128 = 1;
        let e = self.exp10 + scale;
        if e >= 0 {
            num = num.checked_mul(10i128.checked_pow(e as u32)?)?;
        } else if e < -36 {
            // Far below one unit: rounds up to 1 for positive, 0 for negative values.
            return Some(if num > 0 { 1 } else { 0 });
        } else {
            den = 10i128.pow((-e) as u32);
        }
        num = num.checked_mul(1i128.checked_shl(self.pow2)?)?;
        let q = num.div_euclid(den);
        let r = num.rem_euclid(den);
        let v = if r != 0 { q + 1 } else { q };
        i64::try_from(v).ok()
    }

    /// Value in thousandths (milli-units), rounded up: `MilliValue()`.
    pub fn milli(&self) -> Option<i64> {
        self.scaled_ceil(3)
    }

    /// Value in whole units, rounded up: `Value()`.
    pub fn units(&self) -> Option<i64> {
        self.scaled_ceil(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn milli(s: &str) -> i64 {
        Quantity::parse(s).unwrap().milli().unwrap()
    }
    fn units(s: &str) -> i64 {
        Quantity::parse(s).unwrap().units().unwrap()
    }

    #[test]
    fn parses_kubernetes_forms() {
        assert_eq!(milli("100m"), 100);
        assert_eq!(milli("1.5"), 1500);
        assert_eq!(milli("2"), 2000);
        assert_eq!(milli(".5"), 500);
        assert_eq!(milli("5."), 5000);
        assert_eq!(milli("+3"), 3000);
        assert_eq!(units("2Gi"), 2 * 1024 * 1024 * 1024);
        assert_eq!(units("500Mi"), 500 * 1024 * 1024);
        assert_eq!(units("1e3"), 1000);
        assert_eq!(units("1E3"), 1000);
        assert_eq!(units("1.5e3"), 1500);
        assert_eq!(units("128974848"), 128_974_848);
        assert_eq!(units("129e6"), 129_000_000);
        assert_eq!(units("123Mi"), 123 * 1024 * 1024);
        assert_eq!(units("1k"), 1000);
        assert_eq!(units("1M"), 1_000_000);
        assert_eq!(units("1.5Gi"), 1_610_612_736);
        assert_eq!(units("1Ei"), 1 << 60);
        assert_eq!(milli("0"), 0);
        assert_eq!(milli("0.0"), 0);
    }

    #[test]
    fn rounds_up_like_kubernetes() {
        assert_eq!(milli("0.0001"), 1);
        assert_eq!(milli("1n"), 1);
        assert_eq!(units("100m"), 1);
        assert_eq!(units("1001m"), 2);
        assert_eq!(milli("1500u"), 2);
        assert_eq!(milli("-1500u"), -1);
    }

    #[test]
    fn negative_values_are_reported() {
        let q = Quantity::parse("-1").unwrap();
        assert!(q.is_negative());
        assert_eq!(q.milli(), Some(-1000));
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "", "abc", "1.2.3", "1Gb", "1 Gi", "--1", "1e", "1ee3", "Gi", "m", "1e+", "1.5x",
        ] {
            assert!(Quantity::parse(bad).is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn overflow_is_none_not_a_panic() {
        assert_eq!(Quantity::parse("100Ei").unwrap().milli(), None);
        assert!(Quantity::parse("1e400").is_err());
        assert_eq!(Quantity::parse("1e99").unwrap().units(), None);
    }

    proptest::proptest! {
        #[test]
        fn integers_round_trip(n in 0i64..1_000_000_000_000) {
            proptest::prop_assert_eq!(units(&n.to_string()), n);
            proptest::prop_assert_eq!(milli(&format!("{n}m")), n);
        }
    }
}
