//! A log format as `sojourn.workloads.logformat.Layout` compiles it: the literal text
//! before each field (`separators[0]` opens the line), after the last one, and each
//! field's role. Handed over as JSON by `importers.py`:
//!
//! ```json
//! {"separators": ["", " ", " ", " [", "] \"", "\" ", " ", ""], "open_end": true,
//!  "fields": [{"role": "host"}, {"role": ""}, {"role": ""}, {"role": "time", "time": "clf"},
//!             {"role": "request"}, {"role": "status"}, {"role": "size"}]}
//! ```
//!
//! Times are `clf` (`%d/%b/%Y:%H:%M:%S %z`), `iso` (`%Y-%m-%dT%H:%M:%S%z`) or `epoch`
//! (seconds times `unit`); units are decimal text (`"1e-06"`), parsed exactly.

use serde::Deserialize;
use std::fmt;

/// How a time field is written.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TimeKind {
    /// `10/Oct/2000:13:55:36 -0700` (Apache `%t`, nginx `$time_local`).
    Clf,
    /// `2000-10-10T13:55:36-07:00` (nginx `$time_iso8601`).
    Iso,
    /// Unix time in `unit` seconds (`$msec`, `%{msec}t`).
    Epoch(f64),
}

/// What a field feeds (`logformat.py`'s roles).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Role {
    Host,
    Time(TimeKind),
    Request,
    Method,
    Path,
    Status,
    Size,
    /// A response time in `unit` seconds.
    Response(f64),
    Upstream,
    Forwarded,
    Ignored,
}

/// A compiled log format.
#[derive(Clone, Debug)]
pub struct Layout {
    pub roles: Vec<Role>,
    /// `roles.len() + 1` literal texts, Latin-1 bytes (lines are read as Latin-1).
    pub separators: Vec<Vec<u8>>,
    /// Anything may follow the last field (the default Common/Combined layout).
    pub open_end: bool,
}

/// A layout this parser cannot take (the Python reference then reads the log).
#[derive(Debug, PartialEq)]
pub enum LayoutError {
    Json(String),
    /// A separator with a character above U+00FF: no Latin-1 line holds it.
    NotLatin1(String),
    UnknownRole(String),
    UnknownTime(String),
    BadUnit(String),
    /// Not one separator more than fields, or no field.
    Shape,
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutError::Json(err) => write!(f, "layout is not the expected JSON: {err}"),
            LayoutError::NotLatin1(text) => write!(f, "separator {text:?} has a character above U+00FF"),
            LayoutError::UnknownRole(role) => write!(f, "unknown field role {role:?}"),
            LayoutError::UnknownTime(kind) => write!(f, "unknown time kind {kind:?} (expected clf, iso or epoch)"),
            LayoutError::BadUnit(unit) => write!(f, "unit {unit:?} is not a decimal number"),
            LayoutError::Shape => write!(f, "a layout needs fields and one separator more than fields"),
        }
    }
}

impl std::error::Error for LayoutError {}

#[derive(Deserialize)]
struct FieldJson {
    role: String,
    #[serde(default)]
    time: String,
    #[serde(default)]
    unit: Option<String>,
}

#[derive(Deserialize)]
struct LayoutJson {
    separators: Vec<String>,
    fields: Vec<FieldJson>,
    #[serde(default)]
    open_end: bool,
}

fn unit(text: &Option<String>) -> Result<f64, LayoutError> {
    match text {
        None => Ok(1.0),
        Some(text) => text.parse::<f64>().map_err(|_| LayoutError::BadUnit(text.clone())),
    }
}

fn latin1(text: &str) -> Result<Vec<u8>, LayoutError> {
    text.chars()
        .map(|c| u8::try_from(u32::from(c)).map_err(|_| LayoutError::NotLatin1(text.to_string())))
        .collect()
}

impl Layout {
    /// The layout `importers.py` sends (see the module doc).
    pub fn from_json(text: &str) -> Result<Layout, LayoutError> {
        let raw: LayoutJson = serde_json::from_str(text).map_err(|e| LayoutError::Json(e.to_string()))?;
        let mut roles = Vec::with_capacity(raw.fields.len());
        for field in &raw.fields {
            roles.push(match field.role.as_str() {
                "host" => Role::Host,
                "time" => Role::Time(match field.time.as_str() {
                    "clf" => TimeKind::Clf,
                    "iso" => TimeKind::Iso,
                    "epoch" => TimeKind::Epoch(unit(&field.unit)?),
                    other => return Err(LayoutError::UnknownTime(other.to_string())),
                }),
                "request" => Role::Request,
                "method" => Role::Method,
                "path" => Role::Path,
                "status" => Role::Status,
                "size" => Role::Size,
                "response_s" => Role::Response(unit(&field.unit)?),
                "upstream_response_s" => Role::Upstream,
                "forwarded_for" => Role::Forwarded,
                "" => Role::Ignored,
                other => return Err(LayoutError::UnknownRole(other.to_string())),
            });
        }
        let separators = raw.separators.iter().map(|s| latin1(s)).collect::<Result<Vec<_>, _>>()?;
        Layout::new(roles, separators, raw.open_end)
    }

    pub fn new(roles: Vec<Role>, separators: Vec<Vec<u8>>, open_end: bool) -> Result<Layout, LayoutError> {
        if roles.is_empty() || separators.len() != roles.len() + 1 {
            return Err(LayoutError::Shape);
        }
        Ok(Layout { roles, separators, open_end })
    }

    /// The default layout: the Common prefix `%h %l %u %t "%r" %>s %b`, anything after.
    pub fn common(open_end: bool) -> Layout {
        let separators = ["", " ", " ", " [", "] \"", "\" ", " ", ""].iter().map(|s| s.as_bytes().to_vec()).collect();
        let roles = vec![
            Role::Host,
            Role::Ignored,
            Role::Ignored,
            Role::Time(TimeKind::Clf),
            Role::Request,
            Role::Status,
            Role::Size,
        ];
        Layout::new(roles, separators, open_end).expect("the Common layout is well formed")
    }

    pub fn has(&self, role: fn(&Role) -> bool) -> bool {
        self.roles.iter().any(role)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_json_python_sends() {
        let text = r#"{"separators": ["", " ", " ", " [", "] \"", "\" ", " ", " ", ""], "open_end": false,
            "fields": [{"role": "host"}, {"role": ""}, {"role": ""}, {"role": "time", "time": "clf"},
                       {"role": "request"}, {"role": "status"}, {"role": "size"},
                       {"role": "response_s", "unit": "1e-06"}]}"#;
        let layout = Layout::from_json(text).unwrap();
        assert_eq!(layout.roles[7], Role::Response(1e-6));
        assert_eq!(layout.separators[4], b"] \"");
        assert!(!layout.open_end);
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        let cases = [
            (r#"{"separators": ["→", ""], "fields": [{"role": "host"}]}"#, LayoutError::NotLatin1("→".into())),
            (r#"{"separators": ["", ""], "fields": [{"role": "time", "time": "%H"}]}"#, LayoutError::UnknownTime("%H".into())),
            (r#"{"separators": [""], "fields": [{"role": "host"}]}"#, LayoutError::Shape),
            (r#"{"separators": ["", ""], "fields": [{"role": "colour"}]}"#, LayoutError::UnknownRole("colour".into())),
        ];
        for (text, error) in cases {
            assert_eq!(Layout::from_json(text).unwrap_err(), error, "{text}");
        }
        // Latin-1 above ASCII is fine: lines are read as Latin-1.
        let layout = Layout::from_json(r#"{"separators": ["", "§", ""], "fields": [{"role": "host"}, {"role": "size"}]}"#);
        assert_eq!(layout.unwrap().separators[1], vec![0xA7]);
    }
}
