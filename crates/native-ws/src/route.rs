//! Routing: which route pattern an upgrade request's path matches (the server tries the routes
//! in the order they were added).

/// Does request path `path` (no query) match a route pattern? Patterns: "/*" or "*" matches every
/// path; "/prefix/*" matches "/prefix", "/prefix/" and anything under "/prefix/"; any other pattern
/// matches that exact path, and a pattern "/x" also matches "/x/" (trailing slash tolerated).
#[must_use]
pub fn path_matches(pattern: &str, path: &str) -> bool {
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
