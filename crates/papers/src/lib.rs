//! The papers' tables, written once in `python/sojourn/papers.toml` and read here with
//! `include_str!` and serde, so the Rust crates and the Python package share one copy
//! (the file cites where each table is printed; python/tests/test_papers.py checks it
//! against the papers' text).

use serde::Deserialize;
use std::sync::OnceLock;

const PAPERS_TOML: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../python/sojourn/papers.toml"));

/// 004 Table 1: the SURGE empirical size model.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Surge {
    pub body_mu: f64,
    pub body_sigma: f64,
    pub cut_bytes: f64,
    pub tail_k: f64,
    pub tail_alpha: f64,
    pub tail_p: f64,
}

/// One transient workload of 000 Table 1.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Transient {
    pub name: String,
    /// "alternating" or "intermittent".
    pub kind: String,
    pub low_s: f64,
    pub high_s: f64,
    pub low_rho: f64,
    pub high_rho: f64,
}

/// 003's sessions: stages (§2), Fig. 5 transitions in percent, the §4.1 study's
/// processing times, the §5.2 classes and Table 2's weight assignments.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Sessions {
    pub stages: Vec<String>,
    pub fig5_percent: Vec<Vec<f64>>,
    pub study_service_times: Vec<f64>,
    pub class_names: Vec<String>,
    pub class_timeouts_s: Vec<f64>,
    pub table2_weights: Vec<Vec<f64>>,
    pub table2_productivity: Vec<f64>,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Papers {
    pub surge: Surge,
    pub transient: Vec<Transient>,
    pub sessions: Sessions,
}

/// The tables, parsed on first use.
pub fn papers() -> &'static Papers {
    static PAPERS: OnceLock<Papers> = OnceLock::new();
    PAPERS.get_or_init(|| toml::from_str(PAPERS_TOML).expect("python/sojourn/papers.toml parses (checked by the tests)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_file_parses_and_its_tables_are_whole() {
        let p = papers();
        assert_eq!(p.transient.len(), 10);
        let s = &p.sessions;
        let n = s.stages.len();
        assert!(s.fig5_percent.len() == n && s.fig5_percent.iter().all(|row| row.len() == n));
        assert_eq!(s.study_service_times.len(), n);
        assert_eq!(s.class_names.len(), s.class_timeouts_s.len());
        assert!(s.table2_weights.iter().all(|w| w.len() == n));
        assert_eq!(s.table2_weights.len(), s.table2_productivity.len());
    }
}
