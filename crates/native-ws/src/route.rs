//! Routing: which route pattern an upgrade request's path matches, and which route a request
//! goes to when several match ([`select`]: the first added, or uWS's priority for uWS patterns).

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

/// The route a request path goes to, as an index into `patterns` (in the order the routes were
/// added), or None. Plain patterns: the first that matches. Patterns prefixed with
/// [`UWS_PATTERN_PREFIX`]: uWebSockets.js's priority whatever the order — segment by segment, a
/// static segment before a parameter before a wildcard (its router tries children in that order);
/// equal shapes go to the first added. (A plain match comes before a uWS one; an app has one kind.)
#[must_use]
pub fn select<'a>(patterns: impl IntoIterator<Item = &'a str>, path: &str) -> Option<usize> {
    let mut best: Option<(usize, Vec<u8>)> = None;
    for (i, pattern) in patterns.into_iter().enumerate() {
        if !path_matches(pattern, path) {
            continue;
        }
        let Some(uws) = pattern.strip_prefix(UWS_PATTERN_PREFIX) else {
            return Some(best.map_or(i, |(b, _)| b));
        };
        let rank = uws_rank(uws);
        if best.as_ref().is_none_or(|(_, r)| rank < *r) {
            best = Some((i, rank));
        }
    }
    best.map(|(i, _)| i)
}

/// Per segment: 0 static, 1 parameter, 2 wildcard (lower goes first).
fn uws_rank(pattern: &str) -> Vec<u8> {
    pattern
        .split('/')
        .map(|seg| match seg.as_bytes().first() {
            Some(b':') => 1,
            Some(b'*') => 2,
            _ => 0,
        })
        .collect()
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

#[cfg(test)]
mod tests;
