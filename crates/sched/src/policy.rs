//! Which response gets the next write quantum.
//!
//! A policy is only a priority key over a response's progress: lower keys are
//! served first, equal keys in the order they became ready. This one rule gives
//! processor sharing (a constant key: round robin, 004 §3.1 "size-independent"),
//! SRPT (remaining bytes, 000 §3 and 004 §3.1 "shortest-connection-first") and
//! LAS (attained bytes, for when sizes are not known in advance).

use std::fmt;
use std::str::FromStr;

/// How far a response has got: bytes still to send and bytes already sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Progress {
    pub remaining: u64,
    pub attained: u64,
}

impl Progress {
    /// A response of `size` bytes of which nothing has been sent yet.
    pub fn new(size: u64) -> Self {
        Progress { remaining: size, attained: 0 }
    }

    /// The progress after `sent` more bytes went out (saturating at zero remaining).
    pub fn after(self, sent: u64) -> Self {
        let sent = sent.min(self.remaining);
        Progress { remaining: self.remaining - sent, attained: self.attained + sent }
    }
}

/// A scheduling policy: a priority key, lower served first.
pub trait Policy: Send + fmt::Debug {
    /// The name used on command lines and in configs.
    fn name(&self) -> &'static str;
    /// The priority key of a response with this progress.
    fn key(&self, progress: Progress) -> u64;
}

/// Processor sharing by round robin with equal quanta: what Apache and nginx do
/// by default (000 §1, "FAIR").
#[derive(Clone, Copy, Debug, Default)]
pub struct Fair;

impl Policy for Fair {
    fn name(&self) -> &'static str {
        "fair"
    }
    fn key(&self, _progress: Progress) -> u64 {
        0
    }
}

/// Shortest remaining processing time: the response with the fewest bytes left
/// goes first (000 §3, 004 §3.1).
#[derive(Clone, Copy, Debug, Default)]
pub struct Srpt;

impl Policy for Srpt {
    fn name(&self) -> &'static str {
        "srpt"
    }
    fn key(&self, progress: Progress) -> u64 {
        progress.remaining
    }
}

/// Least attained service: the response that has sent the fewest bytes goes
/// first; needs no size in advance.
#[derive(Clone, Copy, Debug, Default)]
pub struct Las;

impl Policy for Las {
    fn name(&self) -> &'static str {
        "las"
    }
    fn key(&self, progress: Progress) -> u64 {
        progress.attained
    }
}

/// The policies selectable by name, as an explicit table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PolicyKind {
    Fair,
    Srpt,
    Las,
}

impl PolicyKind {
    pub const ALL: [PolicyKind; 3] = [PolicyKind::Fair, PolicyKind::Srpt, PolicyKind::Las];

    pub fn name(self) -> &'static str {
        self.build().name()
    }

    pub fn build(self) -> Box<dyn Policy> {
        match self {
            PolicyKind::Fair => Box::new(Fair),
            PolicyKind::Srpt => Box::new(Srpt),
            PolicyKind::Las => Box::new(Las),
        }
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The error for a policy name that is not in the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownPolicy(pub String);

impl fmt::Display for UnknownPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<_> = PolicyKind::ALL.iter().map(|p| p.name()).collect();
        write!(f, "unknown policy {:?}: expected one of {}", self.0, names.join(", "))
    }
}

impl std::error::Error for UnknownPolicy {}

impl FromStr for PolicyKind {
    type Err = UnknownPolicy;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PolicyKind::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownPolicy(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for kind in PolicyKind::ALL {
            assert_eq!(kind.name().parse::<PolicyKind>().unwrap(), kind);
        }
        let err = "sjf".parse::<PolicyKind>().unwrap_err().to_string();
        assert!(err.contains("\"sjf\"") && err.contains("fair, srpt, las"), "{err}");
    }

    #[test]
    fn progress_saturates() {
        let p = Progress::new(10).after(4);
        assert_eq!(p, Progress { remaining: 6, attained: 4 });
        assert_eq!(p.after(100), Progress { remaining: 0, attained: 10 });
    }
}
