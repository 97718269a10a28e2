//! HTTP/1.1 framing for a static server, on httparse (RFC 9110, RFC 9112).
//!
//! Pure functions only (no I/O, no clock): [`request`] turns bytes into a bounded
//! [`Request`] or the status to answer, [`path`] maps a target to a path that
//! cannot leave the document root, [`conditional`] picks 200/206/304/416 from
//! validators and ranges, and [`response`] writes response heads.

pub mod conditional;
pub mod path;
pub mod request;
pub mod response;

pub use conditional::{select, Representation, Selection};
pub use path::{resolve_target, PathError, Resolved};
pub use request::{parse_request, HttpError, Limits, Method, Request};
pub use response::{content_type, write_head, Head, HeadCommon, HeadFields};
