//! HTTP request targets (RFC 9112 §3.2): which ones we accept, and the origin form
//! (path + optional "?query") a route is matched against.
//!
//! Accepted: origin-form (`/path?query`) and absolute-form (`scheme://authority/path?query`,
//! which a server must accept; it is reduced to its path and query). Refused with 400: anything
//! else (asterisk-form `*`, authority-form, a bare word), a fragment (`#`), a `%` not followed by
//! two hex digits, and an absolute-form authority that is not a host with an optional port of
//! at most 65535 (`http://%`, `http://h:99999/`). Other characters are left to the HTTP parser
//! (httparse on the own listener, Node's on `attach()`), which is lenient about those browsers
//! send unescaped (`|`, `{`, `^` ...). Both entry points use this one rule, so a target gets the
//! same answer on each.

use std::borrow::Cow;

/// The largest TCP port.
const MAX_PORT: u32 = 65_535;

/// The origin form of a request target, or None when the target is not acceptable (answer 400).
/// An absolute-form target gives its path and query ("/" when it has no path).
#[must_use]
pub fn origin_form(target: &str) -> Option<Cow<'_, str>> {
    if target.contains('#') || !escapes_valid(target) {
        return None;
    }
    if target.starts_with('/') {
        return Some(target.into());
    }
    let (scheme, rest) = target.split_once("://")?;
    if scheme.is_empty()
        || !scheme.as_bytes()[0].is_ascii_alphabetic()
        || !scheme.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
    {
        return None;
    }
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    if !authority_valid(&rest[..end]) {
        return None;
    }
    Some(match rest.as_bytes()[end..].first() {
        Some(b'/') => rest[end..].into(),
        Some(_) => format!("/{}", &rest[end..]).into(),
        None => "/".into(),
    })
}

/// Every `%` starts a `%HH` escape.
fn escapes_valid(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if i + 2 >= b.len() || !(b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit()) {
                return false;
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    true
}

/// `[userinfo@]host[:port]` with a non-empty host: an IP literal in brackets or a reg-name /
/// IPv4 (unreserved, sub-delims, escapes), and a port of digits up to 65535.
fn authority_valid(authority: &str) -> bool {
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = if let Some(literal) = hostport.strip_prefix('[') {
        let Some((inside, after)) = literal.split_once(']') else { return false };
        if inside.is_empty() || !inside.bytes().all(|b| b.is_ascii_hexdigit() || b":.".contains(&b)) {
            return false;
        }
        match after {
            "" => ("[]", None),
            _ => match after.strip_prefix(':') {
                Some(p) => ("[]", Some(p)),
                None => return false,
            },
        }
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    let host_ok = !host.is_empty()
        && host.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=%[]".contains(&b));
    let port_ok = port.is_none_or(|p| {
        p.is_empty() || (p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u32>().is_ok_and(|n| n <= MAX_PORT))
    });
    host_ok && port_ok
}

#[cfg(test)]
mod tests;
