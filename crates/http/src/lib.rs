//! HTTP/1.1 framing for a static server, on httparse (RFC 9110, RFC 9112).
