//! What a simulation writes: per-job records in the load generator's
//! `records.csv` format (docs/formats.md, the columns that apply to a
//! simulation) and a summary of the run.
//!
//! Guarantees: one record per job, in job order, every one `final` and `ok`, or
//! `refused` (a 503 of no body) for a job an admission policy refused; the summary's
//! response times are of the jobs served, and it is a pure function of the jobs and
//! their outcomes, so equal runs give byte-identical files.

use std::io::Write;

use serde::Serialize;

use crate::fluid::{Job, Served};
use crate::trace::TraceRow;

const RECORD_COLUMNS: [&str; 22] = [
    "request_id",
    "attempt",
    "final",
    "client",
    "session",
    "class",
    "path",
    "expected_size",
    "bytes",
    "status",
    "scheduled_s",
    "issued_s",
    "dispatch_s",
    "connect_start_s",
    "connect_end_s",
    "conn_id",
    "reuse_index",
    "sent_s",
    "first_byte_s",
    "last_byte_s",
    "outcome",
    "error",
];

/// Writes `records.csv`: `scheduled_s` = `issued_s` = `dispatch_s` = `sent_s` = arrival,
/// `first_byte_s` = start of service, `last_byte_s` = completion, `conn_id` =
/// `request_id`; trace columns are carried through when `rows` is given; `refused[i]`
/// (empty: none) marks the jobs an admission policy refused.
pub fn write_records<W: Write>(out: W, jobs: &[Job], served: &[Served], refused: &[bool], rows: Option<&[TraceRow]>) -> csv::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record(RECORD_COLUMNS)?;
    for (i, (job, s)) in jobs.iter().zip(served).enumerate() {
        let row = rows.map(|r| &r[i]);
        let size = job.size.round() as u64;
        let refused = refused.get(i).copied().unwrap_or(false);
        let id = i.to_string();
        let size_text = size.to_string();
        let arrival = format!("{:.6}", job.arrival);
        w.write_record([
            id.as_str(),
            "0",
            "1",
            &row.map_or(0, |r| r.client).to_string(),
            &row.and_then(|r| r.session).unwrap_or(-1).to_string(),
            &row.and_then(|r| r.class).unwrap_or(0).to_string(),
            row.map_or("", |r| r.path.as_str()),
            &size.to_string(),
            if refused { "0" } else { &size_text },
            if refused { "503" } else { "200" },
            &arrival,
            &arrival,
            &arrival,
            "",
            "",
            &id,
            "0",
            &arrival,
            &seconds(s.start),
            &seconds(s.finish),
            if refused { "refused" } else { "ok" },
            "",
        ])?;
    }
    w.flush()?;
    Ok(())
}

/// A time column: empty when the job never reached it (a response refused before its first
/// byte has no start), as docs/formats.md writes a missing time.
fn seconds(t: f64) -> String {
    if t.is_finite() {
        format!("{t:.6}")
    } else {
        String::new()
    }
}

/// Mean response time and slowdown of the jobs in one size range.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SizeBin {
    /// Fraction of jobs (by size rank) below this bin and at its top.
    pub from_fraction: f64,
    pub to_fraction: f64,
    pub min_size: f64,
    pub max_size: f64,
    pub jobs: usize,
    pub mean_response_s: f64,
    pub mean_slowdown: f64,
}

/// Figures of one run (response time = finish − arrival, slowdown = response
/// time / (size / rate), over jobs of non-zero size).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Outcomes {
    pub jobs: usize,
    pub bytes: f64,
    pub offered_rho: f64,
    pub makespan_s: f64,
    pub mean_in_system: f64,
    pub mean_response_s: f64,
    pub mean_slowdown: f64,
    pub p50_response_s: f64,
    pub p90_response_s: f64,
    pub p99_response_s: f64,
    pub max_response_s: f64,
    /// Mean response time of the largest 1% of jobs by size (000 §5.2).
    pub largest_1pct_mean_response_s: f64,
    pub by_size: Vec<SizeBin>,
    /// Jobs refused by an admission policy (absent without one); the figures above are of
    /// the others, except `offered_rho`, which counts every job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<usize>,
}

fn quantile(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let at = ((values.len() - 1) as f64 * q).round() as usize;
    *values.select_nth_unstable_by(at, f64::total_cmp).1
}

/// Summarizes a run on a link of `rate` bytes/s, with `bins` equal-count size bins;
/// `refused` as for [`write_records`] (`None`: no admission policy).
pub fn outcomes(jobs: &[Job], served: &[Served], refused: Option<&[bool]>, rate: f64, bins: usize) -> Outcomes {
    let offered_rho = offered_rho(jobs, rate);
    let Some(refused) = refused else { return served_outcomes(jobs, served, offered_rho, rate, bins) };
    let (kept_jobs, kept_served): (Vec<Job>, Vec<Served>) =
        jobs.iter().zip(served).zip(refused).filter(|(_, &r)| !r).map(|((j, s), _)| (*j, *s)).unzip();
    Outcomes { refused: Some(refused.iter().filter(|&&r| r).count()), ..served_outcomes(&kept_jobs, &kept_served, offered_rho, rate, bins) }
}

/// Offered bytes over link bytes between the first and last arrival.
fn offered_rho(jobs: &[Job], rate: f64) -> f64 {
    let bytes: f64 = jobs.iter().map(|j| j.size).sum();
    let span = jobs.last().map_or(0.0, |j| j.arrival) - jobs.first().map_or(0.0, |j| j.arrival);
    if span > 0.0 { bytes / (rate * span) } else { f64::NAN }
}

fn served_outcomes(jobs: &[Job], served: &[Served], offered_rho: f64, rate: f64, bins: usize) -> Outcomes {
    let n = jobs.len();
    let mut responses: Vec<f64> = jobs.iter().zip(served).map(|(j, s)| s.finish - j.arrival).collect();
    let slowdown = |i: usize| responses[i] / (jobs[i].size / rate);
    let sized: Vec<usize> = (0..n).filter(|&i| jobs[i].size > 0.0).collect();
    let mean = |v: &mut dyn Iterator<Item = f64>, count: usize| if count == 0 { f64::NAN } else { v.sum::<f64>() / count as f64 };
    let mean_slowdown = mean(&mut sized.iter().map(|&i| slowdown(i)), sized.len());
    let by_size_rank = |a: &usize, b: &usize| jobs[*a].size.total_cmp(&jobs[*b].size).then(a.cmp(b));
    let mut by_rank: Vec<usize> = (0..n).collect();
    let top = n.div_ceil(100).min(n);
    if top > 0 && top < n {
        by_rank.select_nth_unstable_by(n - top, by_size_rank);
    }
    let largest = &by_rank[n - top..];
    let largest_1pct_mean_response_s = mean(&mut largest.iter().map(|&i| responses[i]), largest.len());
    let bins = bins.min(n);
    if bins > 0 {
        by_rank.sort_unstable_by(by_size_rank);
    }
    let by_size = (0..bins)
        .map(|b| {
            let (lo, hi) = (b * n / bins, (b + 1) * n / bins);
            let members = &by_rank[lo..hi];
            let with_size: Vec<usize> = members.iter().copied().filter(|&i| jobs[i].size > 0.0).collect();
            SizeBin {
                from_fraction: lo as f64 / n as f64,
                to_fraction: hi as f64 / n as f64,
                min_size: jobs[members[0]].size,
                max_size: jobs[members[members.len() - 1]].size,
                jobs: members.len(),
                mean_response_s: mean(&mut members.iter().map(|&i| responses[i]), members.len()),
                mean_slowdown: mean(&mut with_size.iter().map(|&i| slowdown(i)), with_size.len()),
            }
        })
        .collect();
    let bytes: f64 = jobs.iter().map(|j| j.size).sum();
    let first = jobs.first().map_or(0.0, |j| j.arrival);
    let makespan_s = served.iter().map(|s| s.finish).fold(first, f64::max) - first;
    let total_response: f64 = responses.iter().sum();
    let mean_response_s = mean(&mut responses.iter().copied(), n);
    Outcomes {
        jobs: n,
        bytes,
        offered_rho,
        makespan_s,
        mean_in_system: if makespan_s > 0.0 { total_response / makespan_s } else { f64::NAN },
        mean_response_s,
        mean_slowdown,
        p50_response_s: quantile(&mut responses, 0.5),
        p90_response_s: quantile(&mut responses, 0.9),
        p99_response_s: quantile(&mut responses, 0.99),
        max_response_s: responses.iter().copied().fold(f64::NAN, f64::max),
        largest_1pct_mean_response_s,
        by_size,
        refused: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::read_trace;

    #[test]
    fn records_carry_trace_columns() {
        let trace = read_trace("arrival_s,client,path,size,session,class\n0.5,7,/x,100,3,2\n".as_bytes(), "t").unwrap();
        let served = [Served { start: 0.5, finish: 1.25 }];
        let mut out = Vec::new();
        write_records(&mut out, &trace.jobs, &served, &[], Some(&trace.rows)).unwrap();
        let text = String::from_utf8(out).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next().unwrap().split(',').count(), 22);
        assert_eq!(
            lines.next().unwrap(),
            "0,0,1,7,3,2,/x,100,100,200,0.500000,0.500000,0.500000,,,0,0,0.500000,0.500000,1.250000,ok,"
        );
    }

    #[test]
    fn outcomes_by_hand() {
        let jobs = [Job { arrival: 0.0, size: 2.0 }, Job { arrival: 1.0, size: 1.0 }, Job { arrival: 2.0, size: 0.0 }];
        let served = [Served { start: 0.0, finish: 3.0 }, Served { start: 1.0, finish: 2.0 }, Served { start: 2.0, finish: 2.0 }];
        let o = outcomes(&jobs, &served, None, 1.0, 3);
        assert_eq!(outcomes(&jobs, &served, None, 1.0, 20).by_size.len(), 3, "no more bins than jobs");
        assert_eq!(o.mean_response_s, 4.0 / 3.0);
        assert_eq!(o.mean_slowdown, (1.5 + 1.0) / 2.0);
        assert_eq!(o.largest_1pct_mean_response_s, 3.0);
        assert_eq!(o.offered_rho, 1.5);
        assert_eq!(o.makespan_s, 3.0);
        assert_eq!(o.by_size.iter().map(|b| b.mean_response_s).collect::<Vec<_>>(), vec![0.0, 1.0, 3.0]);
        assert!(o.by_size[0].mean_slowdown.is_nan());
        // Job 0 refused: the figures are job 1's and 2's, the offered load is still all three's.
        let o = outcomes(&jobs, &served, Some(&[true, false, false]), 1.0, 3);
        assert_eq!((o.jobs, o.refused, o.mean_response_s, o.offered_rho), (2, Some(1), 0.5, 1.5));
        let mut out = Vec::new();
        write_records(&mut out, &jobs, &served, &[true, false, false], None).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.lines().nth(1).unwrap().ends_with(",2,0,503,0.000000,0.000000,0.000000,,,0,0,0.000000,0.000000,3.000000,refused,"), "{text}");
        // Refused after waiting (CoDel at its first write): no first byte, an empty field.
        let waited = [Served { start: f64::NAN, finish: 0.5 }];
        let mut out = Vec::new();
        write_records(&mut out, &jobs[..1], &waited, &[true], None).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.lines().nth(1).unwrap().ends_with(",0.000000,,0.500000,refused,"), "{text}");
    }
}
