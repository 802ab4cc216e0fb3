//! The grammar's cases, and the injectivity of rendering.

use super::*;

fn render(t: &str, values: &[&str]) -> String {
    let mut values = values.iter();
    Template::parse(t)
        .unwrap()
        .render(|_| Ok::<_, ()>(values.next().unwrap().to_string()))
        .unwrap()
}

fn paths(t: &Template) -> Vec<(&str, Option<&str>)> {
    t.placeholders().map(|p| (p.path(), p.ty())).collect()
}

#[test]
fn placeholders_and_escapes() {
    let t = Template::parse("a<<b<order.id>:<header.x-tenant>").unwrap();
    assert_eq!(paths(&t), [("order.id", None), ("header.x-tenant", None)]);
    assert_eq!(render("a<<b<x>", &["1"]), "a<b1");
}

#[test]
fn placeholders_may_carry_a_type() {
    let t = Template::parse("t_<header.x-tenant:u64>:<id:uuid>/<raw:str>").unwrap();
    assert_eq!(
        paths(&t),
        [
            ("header.x-tenant", Some("u64")),
            ("id", Some("uuid")),
            ("raw", Some("str"))
        ]
    );
    assert_eq!(render("item_<id:u64>", &["7"]), "item_7");
    for bad in [
        "<id:>",
        "<:u64>",
        "<id:u-64>",
        "<id:u64:x>",
        "<id.:u64>",
        "<id:a.b>",
    ] {
        assert!(
            matches!(
                Template::parse(bad),
                Err(TemplateError::BadPlaceholder { .. })
            ),
            "{bad}"
        );
    }
    // The type is no separator: `<a:u64><b:u64>` is as ambiguous as `<a><b>`.
    assert!(matches!(
        Template::parse("<a:u64><b:u64>"),
        Err(TemplateError::Ambiguous { .. })
    ));
}

#[test]
fn values_cannot_collide() {
    assert_ne!(
        render("<a>:<b>", &["x:y", "z"]),
        render("<a>:<b>", &["x", "y:z"])
    );
    assert_eq!(render("item_<id>", &["7"]), "item_7");
    assert_eq!(render("<a>", &["é /%"]), "%C3%A9%20%2F%25");
}

#[test]
fn errors_name_the_problem() {
    assert_eq!(Template::parse(""), Err(TemplateError::Empty));
    assert!(matches!(
        Template::parse("a<id"),
        Err(TemplateError::Unclosed { at: 1, .. })
    ));
    assert!(matches!(
        Template::parse("<>"),
        Err(TemplateError::BadPlaceholder { .. })
    ));
    assert!(matches!(
        Template::parse("<a b>"),
        Err(TemplateError::BadPlaceholder { .. })
    ));
    let err = Template::parse("<a>_<b>").unwrap_err();
    assert!(err.to_string().contains("`<a>` and `<b>`"), "{err}");
    assert!(Template::parse("<a><b>").is_err());
    assert!(Template::parse("<a>/<b>").is_ok());
}

/// Regression: `%` once counted as a separator, but encoded values contain it, so
/// `<a>%<b>` gave `("", "25 ")` and `("%", "20")` the same name, `%25%20`.
#[test]
fn percent_does_not_separate_placeholders() {
    let joined = |a: &str, b: &str| {
        let mut out = String::new();
        encode_value(&mut out, a);
        out.push('%');
        encode_value(&mut out, b);
        out
    };
    assert_eq!(joined("", "25 "), "%25%20");
    assert_eq!(joined("%", "20"), "%25%20");
    for ambiguous in ["<a>%<b>", "<a>%25<b>", "<a>-%_<b>", "<a>~<b>", "x<a>.<b>y"] {
        assert!(
            matches!(
                Template::parse(ambiguous),
                Err(TemplateError::Ambiguous { .. })
            ),
            "{ambiguous}"
        );
    }
    // Any character outside the encoded alphabet separates, wherever it is in the literal.
    for separated in [
        "<a>%:<b>",
        "<a>_/_<b>",
        "<a><<<b>",
        "<a>>%<b>",
        "<a>é<b>",
        "<a> <b>",
    ] {
        assert!(Template::parse(separated).is_ok(), "{separated}");
    }
}

/// No character of an encoded value is a separator: what the injectivity argument at
/// `is_separator` rests on.
#[test]
fn encoded_values_contain_no_separator() {
    let chars = (0..=0x7f_u32)
        .chain([0xe9, 0x7ff, 0x800, 0xffff, 0x1_0000, 0x10_ffff])
        .filter_map(char::from_u32);
    for c in chars {
        let mut out = String::new();
        encode_value(&mut out, &c.to_string());
        assert!(!out.chars().any(is_separator), "{c:?} encodes as {out:?}");
        assert_eq!(out == c.to_string(), is_unreserved(c), "{c:?}");
    }
}

/// For every accepted template, distinct value tuples built from tricky values (empty,
/// `%`, escapes, separators, unicode) render distinct names.
#[test]
fn distinct_tuples_render_distinct_names() {
    const VALUES: [&str; 16] = [
        "", "%", "%25", "25 ", "20", "%2", "a", "a:b", ":", "/", "_", "a_b", "é", "<", " ", "%3A",
    ];
    let templates = [
        "<a>:<b>",
        "<a>/<b>:<c>",
        "x_<a>:_<b>_",
        "<a>%:<b>",
        "<a><<<b>",
        "<a>é<b>",
        "<a> <b>",
        "p<a>:%25:<b>%",
    ];
    for text in templates {
        let template = Template::parse(text).unwrap();
        let arity = template.placeholders().count();
        let mut seen = std::collections::HashMap::new();
        let mut tuple = vec![0; arity];
        loop {
            let mut next = tuple.iter();
            let name = template
                .render(|_| Ok::<_, ()>(VALUES[*next.next().unwrap()].to_owned()))
                .unwrap();
            if let Some(other) = seen.insert(name.clone(), tuple.clone()) {
                let values = |t: &[usize]| t.iter().map(|&i| VALUES[i]).collect::<Vec<_>>();
                panic!(
                    "{text}: {:?} and {:?} render the same name {name}",
                    values(&other),
                    values(&tuple)
                );
            }
            // The next tuple, counting in base `VALUES.len()`.
            let Some(i) = tuple.iter().rposition(|&v| v + 1 < VALUES.len()) else {
                break;
            };
            tuple[i] += 1;
            tuple[i + 1..].fill(0);
        }
        assert_eq!(seen.len(), VALUES.len().pow(arity as u32), "{text}");
    }
}
