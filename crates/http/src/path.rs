//! From request target to a path relative to the document root, safely.
//!
//! Guarantees (checked by the property tests below): a path returned by
//! [`resolve_target`] is relative, has no `..`, `.` or empty component, and holds
//! no NUL or backslash byte, so joining it to the root can only name something
//! under the root *lexically*. Symlinks that leave the root are the file system's
//! business: the server checks the canonical path (crates/server).
//!
//! Decoding happens exactly once (RFC 3986 §2.4): `%252e%252e` decodes to the
//! literal name `%2e%2e`, never to `..`.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathError {
    /// Not origin-form or absolute-form (RFC 9112 §3.2): 400.
    BadTarget,
    /// Tries to leave the root, or holds NUL or a backslash: 403.
    Forbidden,
}

impl PathError {
    pub fn status(self) -> u16 {
        match self {
            PathError::BadTarget => 400,
            PathError::Forbidden => 403,
        }
    }
}

/// What a target names under the root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// Relative path under the root; empty for the root itself.
    pub relative: PathBuf,
    /// The decoded path ended in `/`: the client asked for a directory.
    pub directory: bool,
}

/// Resolves a request target (origin-form `/p?q` or absolute-form
/// `http://host/p`, RFC 9112 §3.2.1-§3.2.2) to a path under the root.
///
/// Dot segments are removed as in RFC 3986 §5.2.4; one that would climb above
/// the root is [`PathError::Forbidden`], as is any decoded NUL or backslash.
pub fn resolve_target(target: &str) -> Result<Resolved, PathError> {
    let path = match target.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https") => {
            rest.find('/').map_or("/", |at| &rest[at..])
        }
        _ => target,
    };
    let path = path.split(['?', '#']).next().unwrap_or_default();
    if !path.starts_with('/') {
        return Err(PathError::BadTarget);
    }
    let decoded: Vec<u8> = percent_encoding::percent_decode_str(path).collect();
    if decoded.iter().any(|&b| b == 0 || b == b'\\') {
        return Err(PathError::Forbidden);
    }
    let mut segments: Vec<&[u8]> = Vec::new();
    for segment in decoded.split(|&b| b == b'/') {
        match segment {
            b"" | b"." => {}
            b".." => {
                if segments.pop().is_none() {
                    return Err(PathError::Forbidden);
                }
            }
            name => segments.push(name),
        }
    }
    let mut relative = PathBuf::new();
    for segment in &segments {
        relative.push(OsStr::from_bytes(segment));
    }
    let directory = decoded.ends_with(b"/") || decoded.ends_with(b"/.") || decoded.ends_with(b"/..");
    Ok(Resolved { relative, directory })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::path::Component;

    fn resolve(target: &str) -> Result<String, u16> {
        resolve_target(target).map(|r| r.relative.to_string_lossy().into_owned()).map_err(|e| e.status())
    }

    #[test]
    fn table() {
        let cases: [(&str, Result<&str, u16>); 22] = [
            ("/", Ok("")),
            ("/a/b.html", Ok("a/b.html")),
            ("/a//b/./c", Ok("a/b/c")),
            ("/a/../b", Ok("b")),
            ("/a%20b", Ok("a b")),
            ("/a?x=/../../etc", Ok("a")),
            ("/a#frag", Ok("a")),
            ("http://host/a/b", Ok("a/b")),
            ("http://host", Ok("")),
            ("/..", Err(403)),
            ("/../etc/passwd", Err(403)),
            ("/a/../../etc/passwd", Err(403)),
            ("/%2e%2e/etc/passwd", Err(403)),
            ("/%2E%2E%2Fetc%2Fpasswd", Err(403)),
            ("/a/%2e%2e/%2e%2e/x", Err(403)),
            ("/%252e%252e/etc/passwd", Ok("%2e%2e/etc/passwd")),
            ("/..\\etc", Err(403)),
            ("/%5c..%5cetc", Err(403)),
            ("/a%00.html", Err(403)),
            ("*", Err(400)),
            ("a/b", Err(400)),
            ("ftp://host/a", Err(400)),
        ];
        for (target, expect) in cases {
            assert_eq!(resolve(target), expect.map(String::from), "{target:?}");
        }
        assert!(resolve_target("/a/").unwrap().directory);
        assert!(resolve_target("/a/.").unwrap().directory);
        assert!(!resolve_target("/a").unwrap().directory);
    }

    proptest! {
        /// Whatever the target (built from path-ish pieces, encoded or not), a
        /// resolved path stays lexically under the root.
        #[test]
        fn never_escapes(pieces in proptest::collection::vec(prop_oneof![
            Just("/"), Just(".."), Just("."), Just("%2e"), Just("%2E%2e"), Just("%2f"), Just("%5c"), Just("\\"),
            Just("%00"), Just("%25"), Just("a"), Just("b.txt"), Just("//"), Just("?"), Just("%"),
        ], 0..16)) {
            let target = format!("/{}", pieces.concat());
            if let Ok(resolved) = resolve_target(&target) {
                let bytes = resolved.relative.as_os_str().as_bytes();
                prop_assert!(!bytes.contains(&0) && !bytes.contains(&b'\\'));
                for component in resolved.relative.components() {
                    prop_assert!(matches!(component, Component::Normal(_)), "{:?} from {:?}", resolved.relative, target);
                }
            }
        }

        /// Arbitrary bytes never panic and never escape.
        #[test]
        fn arbitrary_targets(target in "\\PC*") {
            if let Ok(resolved) = resolve_target(&target) {
                prop_assert!(resolved.relative.components().all(|c| matches!(c, Component::Normal(_))));
            }
        }
    }
}
