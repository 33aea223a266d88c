//! Routing: which route pattern an upgrade request's path matches (the server tries the routes
//! in the order they were added).

/// A pattern starting with this prefix is matched by uWebSockets.js's rules (the `uws` compat
/// surface registers its patterns so): no trailing-slash tolerance, "/x/*" needs the "/" after
/// "/x" ("/x/" and "/x/a/b" match, "/x" does not).
pub const UWS_PATTERN_PREFIX: &str = "uws:";

/// Does request path `path` (no query) match a route pattern? Patterns: "/*" or "*" matches every
/// path; "/prefix/*" matches "/prefix", "/prefix/" and anything under "/prefix/"; any other pattern
/// matches that exact path, and a pattern "/x" also matches "/x/" (trailing slash tolerated).
/// A segment ":name" matches any one non-empty segment (a route parameter, see [`route_params`]).
/// Patterns prefixed with [`UWS_PATTERN_PREFIX`] match as uWebSockets.js matches them.
#[must_use]
pub fn path_matches(pattern: &str, path: &str) -> bool {
    if let Some(p) = pattern.strip_prefix(UWS_PATTERN_PREFIX) {
        return match_segments(p, path, true).is_some();
    }
    if pattern.contains("/:") {
        return match_segments(pattern, path, false).is_some();
    }
    if pattern == "*" || pattern == "/*" {
        return true;
    }
    if let Some(prefix) = pattern.strip_suffix("/*") {
        return match path.strip_prefix(prefix) {
            Some(rest) => rest.is_empty() || rest.starts_with('/'),
            None => false,
        };
    }
    if path == pattern {
        return true;
    }
    !pattern.ends_with('/') && path.strip_suffix('/') == Some(pattern)
}

/// The route parameters (":name" segments) of `path` under `pattern`, in pattern order, as
/// (name, value) pairs (values as sent, not percent-decoded, as uWS gives them); None when the
/// path does not match.
#[must_use]
pub fn route_params<'a>(pattern: &'a str, path: &'a str) -> Option<Vec<(&'a str, &'a str)>> {
    match pattern.strip_prefix(UWS_PATTERN_PREFIX) {
        Some(p) => match_segments(p, path, true),
        None if path_matches(pattern, path) => Some(match_segments(pattern, path, false).unwrap_or_default()),
        None => None,
    }
}

/// Segment-wise match. A final "*" segment matches the rest (`strict`: at least one more segment,
/// possibly empty; else also none); ":name" one non-empty segment; other segments exactly. Not
/// `strict`: one trailing "/" on the path is tolerated when the pattern has none.
fn match_segments<'a>(pattern: &'a str, path: &'a str, strict: bool) -> Option<Vec<(&'a str, &'a str)>> {
    if pattern == "*" || pattern == "/*" {
        return Some(Vec::new());
    }
    let ps: Vec<&str> = pattern.split('/').collect();
    let mut xs: Vec<&str> = path.split('/').collect();
    let wildcard = ps.last() == Some(&"*");
    let fixed = if wildcard { &ps[..ps.len() - 1] } else { &ps[..] };
    if wildcard {
        if xs.len() < fixed.len() + usize::from(strict) {
            return None;
        }
        xs.truncate(fixed.len());
    } else if xs.len() != ps.len() {
        let trailing = !strict && !pattern.ends_with('/') && xs.len() == ps.len() + 1 && xs.last() == Some(&"");
        if !trailing {
            return None;
        }
        xs.pop();
    }
    let mut params = Vec::new();
    for (p, x) in fixed.iter().zip(&xs) {
        if let Some(name) = p.strip_prefix(':') {
            if x.is_empty() {
                return None;
            }
            params.push((name, *x));
        } else if p != x {
            return None;
        }
    }
    Some(params)
}

/// A request target in origin form (path + optional "?query"). An absolute-form target
/// (`http://host:port/path?q`, RFC 9112 §3.2.2, which a server must accept) gives its path and
/// query ("/" when it has no path); any other target is returned as it is.
#[must_use]
pub fn origin_form(target: &str) -> std::borrow::Cow<'_, str> {
    if target.starts_with('/') {
        return target.into();
    }
    let Some(scheme_end) = target.find("://") else {
        return target.into();
    };
    let scheme = &target[..scheme_end];
    if scheme.is_empty() || !scheme.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b)) {
        return target.into();
    }
    let rest = &target[scheme_end + 3..];
    match rest.find(['/', '?', '#']) {
        Some(i) if rest.as_bytes()[i] == b'/' => rest[i..].into(),
        Some(i) => format!("/{}", &rest[i..]).into(),
        None => "/".into(),
    }
}

#[cfg(test)]
mod tests;
