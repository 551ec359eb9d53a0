//! The text of the `RateLimit-Policy` and `RateLimit` fields: lists of
//! structured-field items (RFC 9651), one per policy item.

use super::quota::{ItemState, PolicyItem};
use axum::http::header::HeaderValue;
use std::fmt::Write;
use std::time::Duration;

/// Whole seconds, rounded up.
pub(super) fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// `"10/1s";q=10;w=1, "100/1m";q=100;w=60`: `w` when the item has a
/// window, and `;qu="<unit>"` unless its unit is requests.
pub(super) fn policy_field(items: &[PolicyItem]) -> String {
    let mut out = String::new();
    for (i, item) in items.iter().enumerate() {
        let sep = if i > 0 { ", " } else { "" };
        let _ = write!(out, "{sep}{};q={}", sf_string(&item.name), item.quota);
        if let Some(window) = item.window {
            let _ = write!(out, ";w={window}");
        }
        if let Some(unit) = item.unit.as_str() {
            let _ = write!(out, ";qu={}", sf_string(unit));
        }
    }
    out
}

/// `"10/1s";r=0;t=1, "100/1m";r=42;t=37`; no `t` when no time can be named.
pub(super) fn state_field(items: &[PolicyItem], states: &[ItemState]) -> String {
    let mut out = String::new();
    for (i, state) in states.iter().enumerate() {
        let Some(item) = items.get(state.index) else { continue };
        let sep = if i > 0 { ", " } else { "" };
        let _ = write!(out, "{sep}{};r={}", sf_string(&item.name), state.remaining);
        if let Some(effective) = state.effective {
            let _ = write!(out, ";t={}", ceil_secs(effective));
        }
    }
    out
}

/// A structured-field string (RFC 9651 §3.3.3): printable ASCII in quotes,
/// with `"` and `\` escaped; anything else becomes `?`.
fn sf_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => out.push('?'),
        }
    }
    out.push('"');
    out
}

/// Every character written by [`policy_field`] and [`state_field`] is
/// printable ASCII, which a header value always accepts.
pub(super) fn value(text: String) -> HeaderValue {
    HeaderValue::try_from(text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    #[test]
    fn sf_strings_escape_quotes_and_backslashes_and_replace_the_rest() {
        let table = [
            ("10/1s", r#""10/1s""#),
            ("a \"b\"", r#""a \"b\"""#),
            ("back\\slash", r#""back\\slash""#),
            ("tab\there", r#""tab?here""#),
            ("é", r#""?""#),
            ("", r#""""#),
        ];
        for (input, expected) in table {
            assert_eq!(sf_string(input), expected, "{input:?}");
        }
    }

    #[test]
    fn policy_fields_list_every_rule_in_declared_order() {
        let table = [
            ("10/1s", r#""10/1s";q=10;w=1"#),
            ("10/1s,100/1m", r#""10/1s";q=10;w=1, "100/1m";q=100;w=60"#),
            ("10/100ms,5/1h", r#""10/100ms";q=10;w=1, "5/1h";q=5;w=3600"#),
            ("3/300ms", r#""3/300ms";q=3;w=1"#),
        ];
        for (strategies, expected) in table {
            let items = PolicyItem::of(&Policy::fixed_window(strategies).unwrap());
            assert_eq!(policy_field(&items), expected, "{strategies}");
        }
    }
}
