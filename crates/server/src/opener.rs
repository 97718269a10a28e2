//! Opening files off the event loops (001 §4: an event-driven server must not
//! block in a handler). A few threads shared by all workers run
//! [`files::load`] (canonicalize, stat, open, read small files) for cache
//! misses; each worker learns of results through its own channel and its
//! loop's mio [`Waker`]. nginx, by contrast, opens files on its event loop
//! unless `aio threads` is configured.
//!
//! Guarantees: each worker asks for a path at most once at a time (requests for
//! a path already being opened wait for the same result, in arrival order);
//! every request handed to [`WorkerOpener::request`] comes back exactly once
//! from [`WorkerOpener::arrived`], unless the worker's loop has ended.

use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};

use mio::Waker;

use crate::files::{load, Key, Lookup, Refusal};

/// One path to open and where to send the result.
struct Job {
    key: Key,
    reply: Sender<(Key, Lookup)>,
    waker: Arc<Waker>,
}

/// The opener threads; they end when every [`WorkerOpener`] (and this) is dropped.
pub struct OpenerPool {
    jobs: Sender<Job>,
}

impl OpenerPool {
    /// Starts `threads` threads opening files under `root` (canonical).
    pub fn start(threads: usize, root: PathBuf, cache_file_max: u64) -> io::Result<OpenerPool> {
        let (jobs, queue) = channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        let root = Arc::new(root);
        for index in 0..threads.max(1) {
            let (queue, root) = (Arc::clone(&queue), Arc::clone(&root));
            std::thread::Builder::new().name(format!("opener-{index}")).spawn(move || loop {
                let next = queue.lock().map_or(None, |q| q.recv().ok());
                let Some(job) = next else { return };
                let result = load(&root, &job.key, cache_file_max);
                // The worker may have ended (shutdown): then nobody waits for this.
                if job.reply.send((job.key, result)).is_ok() {
                    let _ = job.waker.wake();
                }
            })?;
        }
        Ok(OpenerPool { jobs })
    }

    /// A worker's handle: results come back on its own channel, announced by `waker`.
    pub fn for_worker<T>(&self, waker: Arc<Waker>) -> WorkerOpener<T> {
        let (reply, results) = channel();
        WorkerOpener { jobs: self.jobs.clone(), reply, results, waker, waiting: HashMap::new() }
    }
}

/// One worker's view of the pool: the requests waiting for a path, of type `T`.
pub struct WorkerOpener<T> {
    jobs: Sender<Job>,
    reply: Sender<(Key, Lookup)>,
    results: Receiver<(Key, Lookup)>,
    waker: Arc<Waker>,
    waiting: HashMap<Key, Vec<T>>,
}

impl<T> WorkerOpener<T> {
    /// Makes `waiter` wait for `key` to be opened (asking the pool only if no
    /// other waiter already did).
    pub fn request(&mut self, key: Key, waiter: T) {
        if let Some(waiters) = self.waiting.get_mut(&key) {
            waiters.push(waiter);
            return;
        }
        let job = Job { key: key.clone(), reply: self.reply.clone(), waker: Arc::clone(&self.waker) };
        if let Err(refused) = self.jobs.send(job) {
            // The opener threads are gone (they only end with the pool): answer here.
            let job = refused.0;
            let _ = self.reply.send((job.key, Err(Refusal::Internal)));
            let _ = self.waker.wake();
        }
        self.waiting.insert(key, vec![waiter]);
    }

    /// The results that arrived since the last call, each with its waiters in arrival order.
    pub fn arrived(&mut self) -> Vec<(Key, Lookup, Vec<T>)> {
        let results: Vec<(Key, Lookup)> = self.results.try_iter().collect();
        results
            .into_iter()
            .map(|(key, lookup)| {
                let waiters = self.waiting.remove(&key).unwrap_or_default();
                (key, lookup, waiters)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::{Events, Poll, Token};
    use std::time::Duration;

    #[test]
    fn waiters_for_one_path_share_one_open_and_come_back_in_order() {
        let root = std::env::temp_dir().join(format!("sjs2-opener-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("a.txt"), b"hello").unwrap();
        let root = root.canonicalize().unwrap();
        let mut poll = Poll::new().unwrap();
        let waker = Arc::new(Waker::new(poll.registry(), Token(7)).unwrap());
        let pool = OpenerPool::start(2, root.clone(), 1024).unwrap();
        let mut opener = pool.for_worker::<u32>(waker);
        opener.request((PathBuf::from("a.txt"), false), 1);
        opener.request((PathBuf::from("missing"), false), 2);
        opener.request((PathBuf::from("a.txt"), false), 3);
        let mut results = Vec::new();
        let mut events = Events::with_capacity(4);
        while results.len() < 2 {
            poll.poll(&mut events, Some(Duration::from_secs(10))).unwrap();
            assert!(!events.is_empty(), "no wake-up from the opener threads");
            results.extend(opener.arrived());
        }
        results.sort_by(|a, b| a.0.cmp(&b.0));
        let (key, lookup, waiters) = &results[0];
        assert_eq!((key.0.to_str(), waiters.as_slice()), (Some("a.txt"), &[1, 3][..]));
        assert_eq!(lookup.as_ref().unwrap().bytes.as_deref(), Some(&b"hello"[..]));
        let (key, lookup, waiters) = &results[1];
        assert_eq!((key.0.to_str(), waiters.as_slice()), (Some("missing"), &[2][..]));
        assert_eq!(lookup.as_ref().err(), Some(&Refusal::NotFound));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
