//! Numbers as Redis parses and prints them: `string2ll`, `string2d`, `zslParseRange`,
//! `d2string` and the formatting of a Lua number passed to `redis.call`
//! (`luaArgsToRedisArgv`), each after Redis' source (src/util.c, src/t_zset.c,
//! src/script_lua.c).

/// `string2ll`: a decimal `i64` with no sign but `-`, no leading zero (but `0` itself), no
/// space, at most 20 bytes.
pub(crate) fn parse_i64(text: &[u8]) -> Option<i64> {
    // LONG_STR_SIZE is 21: a text of 21 bytes or more is never a number.
    if text.is_empty() || text.len() >= 21 {
        return None;
    }
    if text == b"0" {
        return Some(0);
    }
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut value: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if negative {
        if value > i64::MAX as u64 + 1 {
            return None;
        }
        Some((value as i128).wrapping_neg() as i64)
    } else {
        i64::try_from(value).ok()
    }
}

/// A decimal float as C's `strtod` reads it, the whole text: `None` for anything else.
/// Hexadecimal floats are refused (the `fast_float` parser of current Redis refuses them;
/// Redis 7.0's `strtod` took them: a difference no caller of the model relies on).
fn strtod_whole(text: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(text).ok()?;
    let lower = text.to_ascii_lowercase();
    let unsigned = lower.trim_start_matches(['+', '-']);
    if unsigned.starts_with("0x") || unsigned.contains('_') {
        return None;
    }
    text.parse::<f64>().ok()
}

/// True when `text` spells an infinity (so that an overflow to infinity can be told apart).
fn spells_infinity(text: &[u8]) -> bool {
    let lower = String::from_utf8_lossy(text).to_ascii_lowercase();
    matches!(lower.trim_start_matches(['+', '-']), "inf" | "infinity")
}

/// True when `text` has a non-zero digit before any exponent (so that an underflow to zero
/// can be told apart from a zero).
fn has_nonzero_mantissa(text: &[u8]) -> bool {
    text.iter()
        .take_while(|b| !matches!(b, b'e' | b'E'))
        .any(|b| (b'1'..=b'9').contains(b))
}

/// `string2d` (`getDoubleFromObject`): a score. Refuses an empty text, a leading space, NaN,
/// and a value that overflows to infinity or underflows to zero (`ERANGE`).
pub(crate) fn parse_score(text: &[u8]) -> Option<f64> {
    if text.first().is_none_or(|b| b.is_ascii_whitespace()) {
        return None;
    }
    let value = strtod_whole(text)?;
    if value.is_nan()
        || (value.is_infinite() && !spells_infinity(text))
        || (value == 0.0 && has_nonzero_mantissa(text))
    {
        return None;
    }
    Some(value)
}

/// One bound of a score range (`zslParseRange`): `(` makes it exclusive; the rest is read
/// by `strtod` with no range check, so an empty text is 0. NaN is refused.
pub(crate) fn parse_range_bound(text: &[u8]) -> Option<(f64, bool)> {
    let (exclusive, number) = match text.split_first() {
        Some((b'(', rest)) => (true, rest),
        _ => (false, text),
    };
    let trimmed = number.trim_ascii_start();
    let value = if trimmed.is_empty() && number.is_empty() {
        0.0
    } else {
        strtod_whole(trimmed)?
    };
    (!value.is_nan()).then_some((value, exclusive))
}

/// `double2ll`: the integer a double is exactly, when it is one within ±`LLONG_MAX / 2`.
fn as_exact_i64(value: f64) -> Option<i64> {
    const LIMIT: f64 = (i64::MAX / 2) as f64;
    if !(-LIMIT..=LIMIT).contains(&value) {
        return None;
    }
    let whole = value as i64;
    (whole as f64 == value).then_some(whole)
}

/// `fpconv_dtoa` (deps/fpconv): the shortest digits that read back as `value`, written
/// plain, as a decimal, or in scientific notation as `emit_digits` chooses. Its Grisu2 is
/// shortest for nearly every double; Rust's formatter always is.
fn fpconv_dtoa(value: f64) -> String {
    let negative = value.is_sign_negative();
    let sign = if negative { "-" } else { "" };
    if value == 0.0 {
        return format!("{sign}0");
    }
    if value.is_nan() {
        return format!("{sign}nan");
    }
    if value.is_infinite() {
        return format!("{sign}inf");
    }
    // `{:e}` gives the shortest round-trip digits as `d.ddde±x`.
    let sci = format!("{:e}", value.abs());
    let (mantissa, exponent) = sci.split_once('e').expect("`{:e}` has an exponent");
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exponent: i32 = exponent.parse().expect("`{:e}` has a decimal exponent");
    let ndigits = digits.len() as i32;
    // The value is digits × 10^k.
    let k = exponent - (ndigits - 1);
    let exp = (k + ndigits - 1).abs();
    let body = if k >= 0 && exp < ndigits + 7 {
        format!("{digits}{}", "0".repeat(k as usize))
    } else if k < 0 && (k > -7 || exp < 4) {
        let offset = ndigits - k.abs();
        if offset <= 0 {
            format!("0.{}{digits}", "0".repeat((-offset) as usize))
        } else {
            let (whole, fraction) = digits.split_at(offset as usize);
            format!("{whole}.{fraction}")
        }
    } else {
        let kept = ndigits.min(18 - i32::from(negative)) as usize;
        let (first, rest) = digits[..kept].split_at(1);
        let dot = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let exp_sign = if k + ndigits - 1 < 0 { '-' } else { '+' };
        format!("{first}{dot}e{exp_sign}{exp}")
    };
    format!("{sign}{body}")
}

/// `d2string`: a score as Redis replies it (`ZSCORE`, `WITHSCORES`): `nan`, `inf`, `-inf`,
/// `-0`, an exact integer as an integer, else `fpconv_dtoa`. Redis 7.0 printed the last
/// case with `%.17g` (`0.10000000000000001` where 7.2+ prints `0.1`): the model follows
/// the current servers.
pub(crate) fn format_score(value: f64) -> String {
    if value.is_nan() {
        return "nan".to_owned();
    }
    if value.is_infinite() {
        return if value < 0.0 { "-inf" } else { "inf" }.to_owned();
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    match as_exact_i64(value) {
        Some(whole) => whole.to_string(),
        None => fpconv_dtoa(value),
    }
}

/// A Lua number given to `redis.call` (`luaArgsToRedisArgv`): an exact integer as an
/// integer (so `-0` is `0`), else `fpconv_dtoa`. Redis 7.0 used `%.17g`, and 7.2.0–7.2.4
/// `fpconv_dtoa` alone; both agree with this on integers below 10^15 and on short dyadic
/// fractions (`0.5`), which is all the library passes.
pub(crate) fn format_lua_number(value: f64) -> String {
    match as_exact_i64(value) {
        Some(whole) => whole.to_string(),
        None => fpconv_dtoa(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_parse_as_string2ll_does() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"01",
            b"-0",
            b"+1",
            b" 1",
            b"1 ",
            b"1.0",
            b"9223372036854775808",
        ] {
            assert_eq!(parse_i64(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn scores_parse_as_string2d_does() {
        assert_eq!(parse_score(b"1.5"), Some(1.5));
        assert_eq!(parse_score(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_score(b"+inf"), Some(f64::INFINITY));
        for bad in [
            &b""[..],
            b" 1",
            b"nan",
            b"1e400",
            b"1e-400",
            b"abc",
            b"0x10",
        ] {
            assert_eq!(parse_score(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse_range_bound(b"(5"), Some((5.0, true)));
        assert_eq!(parse_range_bound(b""), Some((0.0, false)));
        assert_eq!(parse_range_bound(b"+inf"), Some((f64::INFINITY, false)));
        assert_eq!(parse_range_bound(b"x"), None);
    }

    #[test]
    fn doubles_print_as_redis_prints_them() {
        assert_eq!(format_score(1500.0), "1500");
        assert_eq!(format_score(-0.0), "-0");
        assert_eq!(format_score(0.1), "0.1");
        assert_eq!(format_score(1.5e-7), "1.5e-7");
        assert_eq!(format_score(1e20), "1e+20");
        assert_eq!(format_score(1e18), "1000000000000000000");
        assert_eq!(format_score(1e30), "1e+30");
        assert_eq!(format_score(123.456), "123.456");
        assert_eq!(format_lua_number(-0.0), "0");
        assert_eq!(format_lua_number(4.5e15), "4500000000000000");
        assert_eq!(format_lua_number(0.5), "0.5");
    }
}
