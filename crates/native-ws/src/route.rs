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

#[cfg(test)]
mod tests;
