//! Reading `trace.csv` (docs/formats.md, "Trace"): the requests to simulate.
//!
//! Columns are looked up by name and unknown ones ignored; `session` and
//! `class` are optional. Guarantees: a trace that loads has finite,
//! non-negative, non-decreasing arrivals; any bad row is reported with its line
//! number and what was expected, never skipped.

use std::path::Path;

use anyhow::{bail, Context};
use serde::Deserialize;

use crate::fluid::Job;

/// The trace columns the records carry through.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct TraceRow {
    pub arrival_s: f64,
    pub client: u32,
    pub path: String,
    pub size: u64,
    #[serde(default, deserialize_with = "csv::invalid_option")]
    pub session: Option<i64>,
    #[serde(default, deserialize_with = "csv::invalid_option")]
    pub class: Option<u8>,
}

/// A loaded trace: the jobs and the rows they came from (same order).
#[derive(Clone, Debug, Default)]
pub struct Trace {
    pub jobs: Vec<Job>,
    pub rows: Vec<TraceRow>,
}

/// Reads a trace from any reader (`origin` names it in errors).
pub fn read_trace<R: std::io::Read>(reader: R, origin: &str) -> anyhow::Result<Trace> {
    let mut csv = csv::ReaderBuilder::new().trim(csv::Trim::All).from_reader(reader);
    let mut trace = Trace::default();
    let mut last = 0.0f64;
    for (i, row) in csv.deserialize::<TraceRow>().enumerate() {
        let line = i + 2;
        let row = row.with_context(|| {
            format!("{origin}: line {line}: expected columns arrival_s (seconds), client, path, size (bytes), optional session, class")
        })?;
        if !(row.arrival_s.is_finite() && row.arrival_s >= 0.0) {
            bail!("{origin}: line {line}: arrival_s {} must be a finite number of seconds >= 0", row.arrival_s);
        }
        if row.arrival_s < last {
            bail!("{origin}: line {line}: arrival_s {} is before the previous row's {last}: arrivals must not decrease", row.arrival_s);
        }
        last = row.arrival_s;
        trace.jobs.push(Job { arrival: row.arrival_s, size: row.size as f64 });
        trace.rows.push(row);
    }
    Ok(trace)
}

pub fn load_trace(path: &Path) -> anyhow::Result<Trace> {
    let file = std::fs::File::open(path).with_context(|| format!("cannot open trace {}", path.display()))?;
    read_trace(std::io::BufReader::new(file), &path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_formats_example_and_extra_columns() {
        let text = "arrival_s,client,path,size,session,extra\n0.000000,0,/o/000017.bin,1520,-1,x\n0.000843,3,/o/000002.bin,87321,,y\n";
        let t = read_trace(text.as_bytes(), "t.csv").unwrap();
        assert_eq!(t.jobs, vec![Job { arrival: 0.0, size: 1520.0 }, Job { arrival: 0.000843, size: 87321.0 }]);
        assert_eq!(t.rows[0].session, Some(-1));
        assert_eq!(t.rows[1].session, None);
        assert_eq!(t.rows[1].class, None);
    }

    #[test]
    fn bad_rows_are_named() {
        let cases = [
            ("arrival_s,client,path,size\n1,0,/a,10\n0.5,0,/b,10\n", "line 3"),
            ("arrival_s,client,path,size\n-1,0,/a,10\n", ">= 0"),
            ("arrival_s,client,path,size\n0,0,/a,ten\n", "line 2"),
            ("arrival_s,client,size\n0,0,10\n", "path"),
        ];
        for (text, needle) in cases {
            let err = format!("{:#}", read_trace(text.as_bytes(), "t.csv").unwrap_err());
            assert!(err.contains(needle) && err.contains("t.csv"), "{err}");
        }
    }
}
