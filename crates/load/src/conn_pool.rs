//! Assigning due requests to connections: pure bookkeeping, no sockets, no clock.
//!
//! Rules (000 §2.4 and Table 2 (E)): connections are serial and persistent (one request at
//! a time); a due request of client `c` goes to an idle connection of `c` that has served
//! fewer than `k` requests, else to a new connection if `c` has fewer than `cap` open, else
//! it waits in `c`'s FIFO (its wait counts as latency). A retry after a user abort
//! (000 Table 2 (H)) needs a *fresh* connection: it never reuses an idle one, and when `c` is
//! at its cap an idle connection of `c` is closed to make room.
//!
//! Guarantees (tested below): a client never has more than `cap` connections open; no
//! connection serves more than `k` requests; every submitted request is either dispatched
//! once or still waiting; waiting requests leave in FIFO order, fresh ones first.

use crate::ids::IdMap;
use std::collections::VecDeque;

pub type ConnId = u64;
pub type RequestId = u64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Send the request on this idle connection; `reuse_index` is how many it served before.
    Reuse { request: RequestId, conn: ConnId, reuse_index: u32 },
    /// Open connection `conn` for `client` and send the request on it.
    Connect { request: RequestId, conn: ConnId, client: u32 },
    /// Close this idle connection (to make room for a fresh one).
    Close { conn: ConnId },
}

#[derive(Debug, Default)]
struct Client {
    open: u32,
    idle: Vec<ConnId>,
    waiting: VecDeque<(RequestId, bool)>,
}

#[derive(Debug)]
struct Conn {
    client: u32,
    served: u32,
}

#[derive(Debug)]
pub struct ConnPool {
    /// Requests per connection, `None` = unlimited.
    max_requests_per_conn: Option<u32>,
    max_conns_per_client: u32,
    clients: IdMap<u32, Client>,
    conns: IdMap<ConnId, Conn>,
    next_conn: ConnId,
}

impl ConnPool {
    pub fn new(max_requests_per_conn: Option<u32>, max_conns_per_client: u32) -> Self {
        assert!(max_conns_per_client > 0 && max_requests_per_conn != Some(0), "validated by the caller");
        ConnPool { max_requests_per_conn, max_conns_per_client, clients: IdMap::default(), conns: IdMap::default(), next_conn: 0 }
    }

    pub fn open_connections(&self) -> usize {
        self.conns.len()
    }

    /// How many requests `conn` has served so far (its next reuse index).
    pub fn served(&self, conn: ConnId) -> Option<u32> {
        self.conns.get(&conn).map(|c| c.served)
    }

    /// Whether the request now sent on `conn` is the last it may carry (so it can ask the
    /// server to close with `Connection: close`).
    pub fn is_last_on(&self, conn: ConnId) -> bool {
        match (self.conns.get(&conn), self.max_requests_per_conn) {
            (Some(c), Some(k)) => c.served + 1 >= k,
            _ => false,
        }
    }

    /// A request became due (`fresh`: it is a retry and must not reuse a connection).
    pub fn submit(&mut self, client: u32, request: RequestId, fresh: bool, actions: &mut impl Extend<Action>) {
        let state = self.clients.entry(client).or_default();
        if fresh {
            state.waiting.push_front((request, true));
        } else {
            state.waiting.push_back((request, false));
        }
        self.drain(client, actions);
    }

    /// Remove a request still waiting for a connection (user abort before dispatch).
    pub fn cancel(&mut self, client: u32, request: RequestId) -> bool {
        let Some(state) = self.clients.get_mut(&client) else { return false };
        let before = state.waiting.len();
        state.waiting.retain(|&(waiting, _)| waiting != request);
        before != state.waiting.len()
    }

    /// `conn` finished a response; `server_keeps_open` is false when the server announced close.
    /// Returns whether the caller must close the connection.
    pub fn response_done(&mut self, conn: ConnId, server_keeps_open: bool, actions: &mut impl Extend<Action>) -> bool {
        let Some(state) = self.conns.get_mut(&conn) else { return true };
        state.served += 1;
        let client = state.client;
        let spent = self.max_requests_per_conn.is_some_and(|k| state.served >= k);
        if spent || !server_keeps_open {
            self.forget(conn);
            self.drain(client, actions);
            return true;
        }
        self.clients.entry(client).or_default().idle.push(conn);
        self.drain(client, actions);
        false
    }

    /// `conn` is gone (failed, aborted, closed by the peer while idle, or closed by a `Close`).
    pub fn closed(&mut self, conn: ConnId, actions: &mut impl Extend<Action>) {
        if let Some(client) = self.forget(conn) {
            self.drain(client, actions);
        }
    }

    fn forget(&mut self, conn: ConnId) -> Option<u32> {
        let state = self.conns.remove(&conn)?;
        let client = self.clients.get_mut(&state.client).expect("a connection's client exists");
        client.open -= 1;
        client.idle.retain(|&idle| idle != conn);
        Some(state.client)
    }

    /// Hand waiting requests of `client` to connections while the rules allow; forget a client
    /// with nothing open or waiting, so memory follows activity, not the number of clients seen.
    fn drain(&mut self, client: u32, actions: &mut impl Extend<Action>) {
        self.assign_waiting(client, actions);
        if self.clients.get(&client).is_some_and(|state| state.open == 0 && state.waiting.is_empty()) {
            self.clients.remove(&client);
        }
    }

    fn assign_waiting(&mut self, client: u32, actions: &mut impl Extend<Action>) {
        loop {
            let cap = self.max_conns_per_client;
            let state = self.clients.get_mut(&client).expect("drained clients exist");
            let Some(&(request, fresh)) = state.waiting.front() else { break };
            if !fresh {
                if let Some(conn) = state.idle.pop() {
                    state.waiting.pop_front();
                    let reuse_index = self.conns[&conn].served;
                    actions.extend([Action::Reuse { request, conn, reuse_index }]);
                    continue;
                }
            }
            if state.open >= cap {
                match state.idle.pop() {
                    // Only a fresh request can be here with an idle connection: make room.
                    Some(idle) => {
                        state.open -= 1;
                        self.conns.remove(&idle);
                        actions.extend([Action::Close { conn: idle }]);
                    }
                    None => break,
                }
            }
            let state = self.clients.get_mut(&client).expect("drained clients exist");
            state.waiting.pop_front();
            state.open += 1;
            let conn = self.next_conn;
            self.next_conn += 1;
            self.conns.insert(conn, Conn { client, served: 0 });
            actions.extend([Action::Connect { request, conn, client }]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn k_requests_then_a_new_connection() {
        let mut pool = ConnPool::new(Some(2), 1);
        let mut actions = Vec::new();
        pool.submit(7, 0, false, &mut actions);
        assert_eq!(actions, [Action::Connect { request: 0, conn: 0, client: 7 }]);
        actions.clear();
        pool.submit(7, 1, false, &mut actions);
        assert!(actions.is_empty(), "the cap of 1 makes request 1 wait");
        assert!(!pool.response_done(0, true, &mut actions));
        assert_eq!(actions, [Action::Reuse { request: 1, conn: 0, reuse_index: 1 }]);
        assert!(pool.is_last_on(0));
        actions.clear();
        assert!(pool.response_done(0, true, &mut actions), "k = 2 reached: close");
        pool.submit(7, 2, false, &mut actions);
        assert_eq!(actions, [Action::Connect { request: 2, conn: 1, client: 7 }]);
    }

    #[test]
    fn a_retry_closes_an_idle_connection_at_the_cap() {
        let mut pool = ConnPool::new(None, 1);
        let mut actions = Vec::new();
        pool.submit(1, 0, false, &mut actions);
        pool.response_done(0, true, &mut actions);
        actions.clear();
        pool.submit(1, 5, true, &mut actions);
        assert_eq!(actions, [Action::Close { conn: 0 }, Action::Connect { request: 5, conn: 1, client: 1 }]);
    }

    #[derive(Debug, Clone)]
    enum Step {
        Submit { client: u32, fresh: bool },
        Finish { pick: usize, keep_open: bool },
        Fail { pick: usize },
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0u32..3, any::<bool>()).prop_map(|(client, fresh)| Step::Submit { client, fresh }),
            (any::<usize>(), any::<bool>()).prop_map(|(pick, keep_open)| Step::Finish { pick, keep_open }),
            any::<usize>().prop_map(|pick| Step::Fail { pick }),
        ]
    }

    proptest! {
        #[test]
        fn caps_and_accounting_hold(k in proptest::option::of(1u32..4), cap in 1u32..4, steps in proptest::collection::vec(step(), 1..200)) {
            let mut pool = ConnPool::new(k, cap);
            let mut busy: Vec<(ConnId, u32)> = Vec::new(); // (conn, client) carrying a request
            let mut open: HashMap<ConnId, u32> = HashMap::new();
            let mut served: HashMap<ConnId, u32> = HashMap::new();
            let mut submitted = 0u64;
            let mut dispatched = 0u64;
            let mut actions = Vec::new();
            for step in steps {
                actions.clear();
                match step {
                    Step::Submit { client, fresh } => {
                        pool.submit(client, submitted, fresh, &mut actions);
                        submitted += 1;
                    }
                    Step::Finish { pick, keep_open } if !busy.is_empty() => {
                        let (conn, _) = busy.swap_remove(pick % busy.len());
                        *served.entry(conn).or_default() += 1;
                        if pool.response_done(conn, keep_open, &mut actions) {
                            open.remove(&conn);
                        }
                    }
                    Step::Fail { pick } if !busy.is_empty() => {
                        let (conn, _) = busy.swap_remove(pick % busy.len());
                        open.remove(&conn);
                        pool.closed(conn, &mut actions);
                    }
                    _ => {}
                }
                for action in &actions {
                    match *action {
                        Action::Connect { conn, client, .. } => {
                            prop_assert!(open.insert(conn, client).is_none());
                            busy.push((conn, client));
                            dispatched += 1;
                        }
                        Action::Reuse { conn, reuse_index, .. } => {
                            prop_assert!(open.contains_key(&conn));
                            prop_assert!(!busy.iter().any(|&(b, _)| b == conn), "serial connections");
                            prop_assert_eq!(reuse_index, served[&conn]);
                            busy.push((conn, open[&conn]));
                            dispatched += 1;
                        }
                        Action::Close { conn } => {
                            prop_assert!(!busy.iter().any(|&(b, _)| b == conn), "only idle ones are closed");
                            open.remove(&conn);
                        }
                    }
                }
                for client in 0..3 {
                    prop_assert!(open.values().filter(|&&c| c == client).count() as u32 <= cap);
                }
                if let Some(k) = k {
                    prop_assert!(served.values().all(|&n| n <= k));
                }
                prop_assert_eq!(open.len(), pool.open_connections());
            }
            let waiting: usize = pool.clients.values().map(|c| c.waiting.len()).sum();
            prop_assert_eq!(submitted, dispatched + waiting as u64);
        }
    }
}
