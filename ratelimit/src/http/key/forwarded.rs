//! RFC 7239 `Forwarded`: the `for=` node of each element of one header line.
//!
//! Parsed as the RFC writes it (a node with a port or an IPv6 address is a
//! quoted string); whatever does not parse is not an address, which stops
//! the walk in [`TrustedProxies::client_ip`](crate::http::TrustedProxies::client_ip).

use std::borrow::Cow;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The `for=` address of each element of `line`, left to right; `None` for
/// an element whose node is not an address (`unknown`, `_hidden`, absent).
/// After a syntax error the rest of the line is one `None`: where its
/// elements begin can no longer be told.
pub(super) fn nodes(line: &[u8]) -> Vec<Option<IpAddr>> {
    let Ok(mut rest) = std::str::from_utf8(line) else { return vec![None] };
    let mut nodes = Vec::new();
    loop {
        match element(rest) {
            Ok((node, after)) => {
                nodes.push(node);
                match after.strip_prefix(',') {
                    Some(after) => rest = after,
                    None => return nodes,
                }
            }
            Err(Malformed) => {
                nodes.push(None);
                return nodes;
            }
        }
    }
}

struct Malformed;

/// One element (`pair *(";" pair)`) up to the `,` that ends it or the end.
fn element(mut s: &str) -> Result<(Option<IpAddr>, &str), Malformed> {
    let mut node = None;
    let mut seen_for = false;
    loop {
        s = s.trim_start_matches(is_ows);
        if s.is_empty() || s.starts_with(',') {
            return Ok((node, s));
        }
        if let Some(after) = s.strip_prefix(';') {
            s = after;
            continue;
        }
        let (name, after) = s.split_at(s.find(|c| !is_tchar(c)).unwrap_or(s.len()));
        let after = after.strip_prefix('=').filter(|_| !name.is_empty()).ok_or(Malformed)?;
        let (value, after) = value(after)?;
        if name.eq_ignore_ascii_case("for") {
            // A parameter occurs at most once per element.
            if std::mem::replace(&mut seen_for, true) {
                return Err(Malformed);
            }
            node = parse_node(&value);
        }
        s = after.trim_start_matches(is_ows);
        if !(s.is_empty() || s.starts_with(',') || s.starts_with(';')) {
            return Err(Malformed);
        }
    }
}

/// A token or a quoted string (its escapes undone), and what follows it.
fn value(s: &str) -> Result<(Cow<'_, str>, &str), Malformed> {
    let Some(quoted) = s.strip_prefix('"') else {
        let end = s.find(|c| !is_tchar(c)).unwrap_or(s.len());
        return if end == 0 { Err(Malformed) } else { Ok((Cow::Borrowed(&s[..end]), &s[end..])) };
    };
    let mut text = String::new();
    let mut chars = quoted.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((Cow::Owned(text), &quoted[i + 1..])),
            '\\' => text.push(chars.next().ok_or(Malformed)?.1),
            c => text.push(c),
        }
    }
    Err(Malformed)
}

/// `192.0.2.1`, `192.0.2.1:80`, `[2001:db8::1]`, `[2001:db8::1]:4711` (a
/// port may be obfuscated, `:_p1`); `unknown` and `_hidden` are not addresses.
fn parse_node(node: &str) -> Option<IpAddr> {
    let (ip, port) = match node.strip_prefix('[') {
        Some(rest) => {
            let (v6, port) = rest.split_once(']')?;
            (IpAddr::V6(v6.parse::<Ipv6Addr>().ok()?), port)
        }
        None => {
            let (v4, port) = node.split_at(node.find(':').unwrap_or(node.len()));
            (IpAddr::V4(v4.parse::<Ipv4Addr>().ok()?), port)
        }
    };
    match port.strip_prefix(':') {
        None if port.is_empty() => Some(ip.to_canonical()),
        Some(port) if is_port(port) || is_obfuscated(port) => Some(ip.to_canonical()),
        _ => None,
    }
}

/// A port number, 0 to 65535 in at most five digits.
pub(super) fn is_port(text: &str) -> bool {
    !text.is_empty() && text.len() <= 5 && text.bytes().all(|b| b.is_ascii_digit()) && text.parse::<u16>().is_ok()
}

/// `_` followed by letters, digits, `.`, `_`, `-`.
fn is_obfuscated(text: &str) -> bool {
    text.strip_prefix('_')
        .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)))
}

fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

fn is_ows(c: char) -> bool {
    c == ' ' || c == '\t'
}

#[cfg(test)]
mod tests {
    use super::nodes;

    fn read(line: &str) -> Vec<Option<String>> {
        nodes(line.as_bytes()).into_iter().map(|n| n.map(|ip| ip.to_string())).collect()
    }

    fn some(ips: &[&str]) -> Vec<Option<String>> {
        ips.iter().map(|ip| Some(ip.to_string())).collect()
    }

    #[test]
    fn the_rfc_examples() {
        assert_eq!(read(r#"for="_gazonk""#), [None]);
        assert_eq!(read(r#"For="[2001:db8:cafe::17]:4711""#), some(&["2001:db8:cafe::17"]));
        assert_eq!(read("for=192.0.2.60;proto=http;by=203.0.113.43"), some(&["192.0.2.60"]));
        assert_eq!(read("for=192.0.2.43, for=198.51.100.17"), some(&["192.0.2.43", "198.51.100.17"]));
        assert_eq!(
            read("for=192.0.2.43,for=\"[2001:db8:cafe::17]\",for=unknown")[..2],
            some(&["192.0.2.43", "2001:db8:cafe::17"])
        );
        assert_eq!(read("for=unknown"), [None]);
        assert_eq!(read(r#"for="192.0.2.43:47011""#), some(&["192.0.2.43"]));
        assert_eq!(read(r#"for="192.0.2.43:_p1""#), some(&["192.0.2.43"]));
    }

    #[test]
    fn elements_without_an_address() {
        assert_eq!(read("proto=https;by=10.0.0.1"), [None]);
        assert_eq!(read("for=_hidden, for=198.51.100.7"), vec![None, Some("198.51.100.7".into())]);
        assert_eq!(read(r#"for="::ffff:198.51.100.7""#), [None], "IPv6 is bracketed");
        assert_eq!(read(r#"for="[::ffff:198.51.100.7]""#), some(&["198.51.100.7"]));
        assert_eq!(read(" ;for=198.51.100.7;; "), some(&["198.51.100.7"]));
        assert_eq!(read(r#"for="\1\9\8.51.100.7""#), some(&["198.51.100.7"]), "escapes are undone");
        assert_eq!(read(r#"for=1.2.3.4;host="a,b", for=5.6.7.8"#), some(&["1.2.3.4", "5.6.7.8"]));
    }

    #[test]
    fn malformed_values_make_the_rest_of_the_line_one_non_address() {
        for bad in [
            "",
            "for=",
            "for",
            "=1.2.3.4",
            "for=1.2.3.4:80",
            "for=[::1]",
            "for=1.2.3.4 junk",
            r#"for="1.2.3.4"junk"#,
            r#"for="[::1""#,
            r#"for="[::1]x""#,
            r#"for="1.2.3.4:99999""#,
            r#"for="1.2.3.4:_""#,
            r#"for="1.2.3"#,
            "for=1.2.3.4;for=5.6.7.8",
            "for=\u{e9}",
        ] {
            assert_eq!(read(bad).last(), Some(&None), "{bad:?}");
        }
        // An unterminated quote swallows what a proxy appended after it.
        assert_eq!(read(r#"for=6.6.6.6, for="x, for=198.51.100.7"#), vec![Some("6.6.6.6".into()), None]);
        assert_eq!(nodes(b"for=\xff"), [None]);
    }
}
