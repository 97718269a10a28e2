//! Per-worker cache of what a path under the root resolves to: the open file (so
//! `sendfile` needs no `open` per request), its validators and, for small files,
//! its bytes. Entries are re-checked with a fresh stat after `ttl`.
//!
//! Guarantees: nothing outside the root is ever returned. A path is served only if
//! its canonical form (all symlinks resolved) lies under the canonical root; a
//! directory is served through its `index.html`; anything but a regular file is 403.
//!
//! The blocking calls (`canonicalize`, `open`, `stat`, reading small files) are
//! all in [`load`], which the event loop never calls: a cache miss is sent to
//! the [`crate::opener`] threads and their result [`FileCache::store`]d.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sojourn_http::{content_type, Representation, Resolved};

/// A file ready to be served.
#[derive(Debug)]
pub struct CachedFile {
    pub file: File,
    pub representation: Representation,
    pub content_type: &'static str,
    /// The whole content when the file is at most `cache_file_max` bytes.
    pub bytes: Option<Arc<[u8]>>,
}

/// Why a path cannot be served, as a status code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    NotFound,
    Forbidden,
    Internal,
}

impl Refusal {
    pub fn status(self) -> u16 {
        match self {
            Refusal::NotFound => 404,
            Refusal::Forbidden => 403,
            Refusal::Internal => 500,
        }
    }

    fn from_io(error: &io::Error) -> Refusal {
        match error.kind() {
            io::ErrorKind::NotFound | io::ErrorKind::NotADirectory | io::ErrorKind::InvalidFilename => Refusal::NotFound,
            io::ErrorKind::PermissionDenied => Refusal::Forbidden,
            _ => Refusal::Internal,
        }
    }
}

pub type Lookup = Result<Arc<CachedFile>, Refusal>;

/// A path relative to the root, and whether the target ended in `/`.
pub type Key = (PathBuf, bool);

pub struct FileCache {
    ttl: Duration,
    /// Entries kept before the cache is emptied: each holds an open descriptor, so the
    /// bound is the worker's share of the descriptors set aside for files.
    max_entries: usize,
    entries: HashMap<Key, (Instant, Lookup)>,
}

impl FileCache {
    pub fn new(ttl: Duration, max_entries: usize) -> Self {
        FileCache { ttl, max_entries: max_entries.max(1), entries: HashMap::new() }
    }

    /// What `key` names under the root, if it was [`load`]ed at most `ttl` ago.
    pub fn fresh(&self, key: &Key, now: Instant) -> Option<Lookup> {
        let (checked, result) = self.entries.get(key)?;
        (now.duration_since(*checked) < self.ttl).then(|| result.clone())
    }

    /// Remembers what [`load`] found for `key` at `checked`.
    pub fn store(&mut self, key: Key, checked: Instant, result: Lookup) {
        if self.entries.len() >= self.max_entries {
            self.entries.clear();
        }
        self.entries.insert(key, (checked, result));
    }
}

/// The key of a resolved request target.
pub fn key_of(resolved: &Resolved) -> Key {
    (resolved.relative.clone(), resolved.directory)
}

/// Opens what `relative` names under `root` (canonical), with its validators and,
/// up to `cache_file_max` bytes, its contents. Blocking: never on an event loop.
pub fn load(root: &Path, (relative, directory): &Key, cache_file_max: u64) -> Lookup {
    let canonical = root.join(relative).canonicalize().map_err(|e| Refusal::from_io(&e))?;
    // Symlinks must not lead out of the root.
    if !canonical.starts_with(root) {
        return Err(Refusal::Forbidden);
    }
    let metadata = canonical.metadata().map_err(|e| Refusal::from_io(&e))?;
    let path = if metadata.is_dir() {
        let index = canonical.join("index.html").canonicalize().map_err(|e| Refusal::from_io(&e))?;
        if !index.starts_with(root) {
            return Err(Refusal::Forbidden);
        }
        index
    } else if *directory {
        return Err(Refusal::NotFound); // `/file.txt/` names no directory
    } else {
        canonical
    };
    let mut file = File::open(&path).map_err(|e| Refusal::from_io(&e))?;
    let metadata = file.metadata().map_err(|e| Refusal::from_io(&e))?;
    if !metadata.is_file() {
        return Err(Refusal::Forbidden);
    }
    let size = metadata.len();
    let modified = metadata.modified().map_err(|e| Refusal::from_io(&e))?;
    let bytes = if size <= cache_file_max {
        let mut content = Vec::with_capacity(size as usize);
        file.read_to_end(&mut content).map_err(|e| Refusal::from_io(&e))?;
        if content.len() as u64 != size {
            return Err(Refusal::Internal); // changed while read: try again next time
        }
        Some(Arc::from(content))
    } else {
        None
    };
    Ok(Arc::new(CachedFile { file, representation: Representation::new(size, modified), content_type: content_type(&path), bytes }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sojourn_http::resolve_target;

    #[test]
    fn refuses_what_leaves_the_root() {
        let base = std::env::temp_dir().join(format!("sjsrv-files-{}", std::process::id()));
        let root = base.join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("small.txt"), b"hello").unwrap();
        std::fs::write(root.join("sub/index.html"), b"<p>").unwrap();
        std::fs::write(base.join("secret"), b"no").unwrap();
        std::os::unix::fs::symlink(base.join("secret"), root.join("out")).unwrap();
        std::os::unix::fs::symlink("small.txt", root.join("in")).unwrap();
        let root = root.canonicalize().unwrap();
        let get = |target: &str| load(&root, &key_of(&resolve_target(target).unwrap()), 4).map(|f| (f.representation.size, f.bytes.is_some()));
        assert_eq!(get("/small.txt"), Ok((5, false)), "5 bytes > cache_file_max 4");
        assert_eq!(get("/in"), Ok((5, false)), "a symlink inside the root is fine");
        assert_eq!(get("/sub/"), Ok((3, true)));
        assert_eq!(get("/sub"), Ok((3, true)));
        assert_eq!(get("/out"), Err(Refusal::Forbidden));
        assert_eq!(get("/nothing"), Err(Refusal::NotFound));
        assert_eq!(get("/small.txt/"), Err(Refusal::NotFound));
        assert_eq!(get("/"), Err(Refusal::NotFound), "no index.html at the root");
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn entries_expire_after_the_ttl() {
        let mut cache = FileCache::new(Duration::from_secs(1), 16);
        let key = (PathBuf::from("a"), false);
        let start = Instant::now();
        assert!(cache.fresh(&key, start).is_none());
        cache.store(key.clone(), start, Err(Refusal::NotFound));
        assert_eq!(cache.fresh(&key, start + Duration::from_millis(999)).map(|r| r.err()), Some(Some(Refusal::NotFound)));
        assert!(cache.fresh(&key, start + Duration::from_secs(1)).is_none());
    }
}
