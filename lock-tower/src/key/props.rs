//! Property tests over the key builder: every spelling the handler's extractor reads as one
//! value gives one lock name, and different values give different names.

use std::borrow::Cow;

use proptest::prelude::*;

use crate::key::KeySpec;

/// The name `template` renders for path parameter `id` and query string `query`.
fn name(template: &str, id: &str, query: &str) -> String {
    let spec = KeySpec::template(template, Vec::new()).unwrap();
    let (parts, ()) = http::Request::builder()
        .uri(format!("/?{query}"))
        .body(())
        .unwrap()
        .into_parts();
    let params = [("id", Cow::Borrowed(id))];
    let name = spec.resolve(&parts, Some(&params)).unwrap();
    String::from_utf8(name.as_bytes().to_vec()).unwrap()
}

/// Percent-encodes the characters of `text` that `mask` picks (bit i for character i), and
/// every character a URI cannot hold as it is.
fn percent_some(text: &str, mask: u64) -> String {
    text.chars()
        .enumerate()
        .map(|(i, c)| {
            let mut buf = [0; 4];
            let plain = c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~');
            let encode = mask >> (i % 64) & 1 == 1 || !plain;
            if encode {
                c.encode_utf8(&mut buf)
                    .bytes()
                    .map(|b| format!("%{b:02X}"))
                    .collect()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// A spelling of `v` that `u64::from_str` (so `Path<u64>`, `Query`) reads as `v`.
fn u64_spelling(v: u64, zeros: usize, plus: bool) -> String {
    format!("{}{}{v}", if plus { "+" } else { "" }, "0".repeat(zeros))
}

fn i64_spelling(v: i64, zeros: usize, plus: bool) -> String {
    let sign = match (v < 0, plus) {
        (true, _) => "-",
        (false, true) => "+",
        (false, false) => "",
    };
    format!("{sign}{}{}", "0".repeat(zeros), v.unsigned_abs())
}

/// A spelling of `v` that `Uuid::from_str` reads as `v`: one of its four forms, any case.
fn uuid_spelling(v: u128, form: u8, upper: bool) -> String {
    let id = uuid::Uuid::from_u128(v);
    let text = match form % 4 {
        0 => id.hyphenated().to_string(),
        1 => id.simple().to_string(),
        2 => id.braced().to_string(),
        _ => id.urn().to_string(),
    };
    if upper {
        text.to_uppercase().replace("URN:UUID:", "urn:uuid:")
    } else {
        text
    }
}

proptest! {
    #[test]
    fn u64_spellings_of_one_value_share_a_name(
        a in any::<u64>(), b in any::<u64>(),
        za in 0..4_usize, zb in 0..4_usize, pa: bool, pb: bool, ma: u64, mb: u64,
    ) {
        let template = "item_<id:u64>:<query.n:u64>";
        let (sa, sb) = (u64_spelling(a, za, pa), u64_spelling(b, zb, pb));
        // The path parameter arrives decoded; the query is decoded by the layer.
        let one = name(template, &sa, &format!("n={}", percent_some(&sa, ma)));
        let two = name(template, &sb, &format!("n={}", percent_some(&sb, mb)));
        prop_assert_eq!(one == two, a == b, "{} {}", one, two);
        prop_assert_eq!(one, format!("item_{a}:{a}"));
    }

    #[test]
    fn i64_spellings_of_one_value_share_a_name(
        a in any::<i64>(), b in any::<i64>(),
        za in 0..4_usize, zb in 0..4_usize, pa: bool, pb: bool, ma: u64,
    ) {
        let (sa, sb) = (i64_spelling(a, za, pa), i64_spelling(b, zb, pb));
        let one = name("<query.n:i64>", "", &format!("n={}", percent_some(&sa, ma)));
        let two = name("<id:i64>", &sb, "");
        prop_assert_eq!(one == two, a == b, "{} {}", one, two);
        prop_assert_eq!(&one, &name("<id:i64>", &i64_spelling(a, zb, pb), ""));
    }

    #[test]
    fn uuid_spellings_of_one_value_share_a_name(
        a in any::<u128>(), b in any::<u128>(), fa: u8, fb: u8, ua: bool, ub: bool, ma: u64,
    ) {
        let (sa, sb) = (uuid_spelling(a, fa, ua), uuid_spelling(b, fb, ub));
        let one = name("<query.n:uuid>", "", &format!("n={}", percent_some(&sa, ma)));
        let two = name("<id:uuid>", &sb, "");
        prop_assert_eq!(one == two, a == b, "{} {}", one, two);
        prop_assert_eq!(&one, &name("<id:uuid>", &uuid_spelling(a, fb, ub), ""));
    }

    /// Raw text: the name is a function of the decoded text, and an injective one.
    #[test]
    fn str_names_follow_the_decoded_text(
        a in "\\PC{1,12}", b in "\\PC{1,12}", ma: u64, mb: u64,
    ) {
        prop_assume!(!a.trim().is_empty() && !b.trim().is_empty());
        let one = name("<query.n:str>:<id:str>", &a, &format!("n={}", percent_some(&a, ma)));
        let two = name("<query.n:str>:<id:str>", &b, &format!("n={}", percent_some(&b, mb)));
        prop_assert_eq!(one == two, a == b, "{} {}", one, two);
    }
}
