//! A strict HTTP/1.1 request-head parser for the webhook listener. Pure: it looks at the bytes received so far
//! and says "need more", "here is a complete head", or "refuse with this status". Limits are checked before
//! anything is allocated for what a client declares.

/// Longest request head (request line and headers) accepted.
pub(crate) const MAX_HEAD: usize = 8 * 1024;
/// Most header lines accepted.
const MAX_HEADERS: usize = 64;

/// A complete, valid request head.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Head {
    /// `GET`, `POST`, … (a token; checked against the allowed methods later).
    pub method: String,
    /// The request target as sent (`/path?query`).
    pub target: String,
    /// Bytes of the head, including the blank line.
    pub len: usize,
    /// Declared body length (0 when absent).
    pub body_len: usize,
    /// Whether the connection stays open after the answer.
    pub keep_alive: bool,
    /// The client waits for `100 Continue` before sending the body.
    pub expect_continue: bool,
    /// `Sec-WebSocket-Key` of a WebSocket upgrade (`Upgrade: websocket`, version 13), else `None`.
    pub ws_key: Option<String>,
}

/// Why a head is refused: the status to answer (the connection is closed after it) and a short reason.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub status: u16,
    pub reason: &'static str,
}

fn refuse(status: u16, reason: &'static str) -> Refusal {
    Refusal { status, reason }
}

/// Parses the head at the start of `buf`. `Ok(None)`: incomplete, read more. A head longer than [`MAX_HEAD`]
/// or a body declared longer than `max_body` is refused as soon as that is known.
pub(crate) fn parse_head(buf: &[u8], max_body: usize) -> Result<Option<Head>, Refusal> {
    let Some(end) = find_end(buf) else {
        if buf.len() > MAX_HEAD {
            return Err(refuse(431, "request head too large"));
        }
        return Ok(None);
    };
    if end > MAX_HEAD {
        return Err(refuse(431, "request head too large"));
    }
    let text =
        std::str::from_utf8(&buf[..end]).map_err(|_| refuse(400, "request head is not UTF-8"))?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(refuse(400, "malformed request line"));
    };
    if method.is_empty() || !method.bytes().all(is_token) {
        return Err(refuse(400, "malformed method"));
    }
    if target.is_empty() || target.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(refuse(400, "malformed request target"));
    }
    let http11 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        _ => return Err(refuse(505, "only HTTP/1.0 and HTTP/1.1 are supported")),
    };
    let (mut body_len, mut keep_alive, mut expect_continue) = (None, http11, false);
    let (mut upgrade, mut ws_key, mut ws_version) = (false, None, false);
    let mut count = 0;
    for line in lines {
        if line.is_empty() {
            break;
        }
        count += 1;
        if count > MAX_HEADERS {
            return Err(refuse(431, "too many header lines"));
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(refuse(400, "malformed header line"));
        };
        // No whitespace before the colon, no obsolete line folding (RFC 9112 §5).
        if name.is_empty() || !name.bytes().all(is_token) {
            return Err(refuse(400, "malformed header name"));
        }
        let value = value.trim_matches([' ', '\t']);
        if value.bytes().any(|b| (b < b' ' && b != b'\t') || b == 0x7f) {
            return Err(refuse(400, "malformed header value"));
        }
        if name.eq_ignore_ascii_case("content-length") {
            if !value.bytes().all(|b| b.is_ascii_digit()) || value.is_empty() {
                return Err(refuse(400, "malformed Content-Length"));
            }
            // More than 20 digits cannot fit; anything over the limit is refused without parsing it whole.
            let n = if value.len() > 19 {
                usize::MAX
            } else {
                value.parse::<usize>().unwrap_or(usize::MAX)
            };
            if body_len.is_some_and(|b| b != n) {
                return Err(refuse(400, "conflicting Content-Length headers"));
            }
            body_len = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(refuse(
                501,
                "chunked bodies are not supported; send Content-Length",
            ));
        } else if name.eq_ignore_ascii_case("connection") {
            for option in value.split(',').map(str::trim) {
                if option.eq_ignore_ascii_case("close") {
                    keep_alive = false;
                } else if option.eq_ignore_ascii_case("keep-alive") {
                    keep_alive = true;
                }
            }
        } else if name.eq_ignore_ascii_case("upgrade") {
            upgrade = value.eq_ignore_ascii_case("websocket");
        } else if name.eq_ignore_ascii_case("sec-websocket-key") {
            // 16 random bytes in base64: 24 characters.
            ws_key = (value.len() == 24).then(|| value.to_string());
        } else if name.eq_ignore_ascii_case("sec-websocket-version") {
            ws_version = value == "13";
        } else if name.eq_ignore_ascii_case("expect") {
            if !value.eq_ignore_ascii_case("100-continue") {
                return Err(refuse(417, "only Expect: 100-continue is supported"));
            }
            expect_continue = true;
        }
    }
    let body_len = body_len.unwrap_or(0);
    if body_len > max_body {
        return Err(refuse(413, "body too large"));
    }
    Ok(Some(Head {
        method: method.to_string(),
        target: target.to_string(),
        len: end,
        body_len,
        keep_alive,
        expect_continue: expect_continue && http11,
        ws_key: ws_key.filter(|_| upgrade && ws_version && http11),
    }))
}

/// The length of the head including its blank line (`\r\n\r\n` or `\n\n`), if complete.
fn find_end(buf: &[u8]) -> Option<usize> {
    let scan = &buf[..buf.len().min(MAX_HEAD + 4)];
    let mut i = 0;
    while let Some(p) = scan[i..].iter().position(|&b| b == b'\n') {
        let nl = i + p;
        let rest = &scan[nl + 1..];
        if rest.first() == Some(&b'\n') {
            return Some(nl + 2);
        }
        if rest.starts_with(b"\r\n") {
            return Some(nl + 3);
        }
        i = nl + 1;
    }
    None
}

/// RFC 9110 token characters.
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A complete answer: status line, plain-text body, and whether the connection stays open.
pub(crate) fn response(status: u16, body: &str, keep_alive: bool) -> Vec<u8> {
    let phrase = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        417 => "Expectation Failed",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    };
    let allow = if status == 405 {
        "Allow: GET, POST\r\n"
    } else {
        ""
    };
    format!(
        "HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n{allow}Connection: {}\r\n\r\n{body}",
        body.len(),
        if keep_alive { "keep-alive" } else { "close" }
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(s: &str) -> Result<Option<Head>, Refusal> {
        parse_head(s.as_bytes(), 65536)
    }

    #[test]
    fn a_plain_get_and_a_post_with_a_body_parse() {
        let h = head("GET /hook?Event=x HTTP/1.1\r\nHost: a\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(
            (h.method.as_str(), h.target.as_str()),
            ("GET", "/hook?Event=x")
        );
        assert_eq!(
            (h.body_len, h.keep_alive, h.expect_continue),
            (0, true, false)
        );
        assert_eq!(h.len, 39);
        let h = head("POST /h HTTP/1.0\nContent-Length: 12\nExpect: 100-continue\n\n{}")
            .unwrap()
            .unwrap();
        assert_eq!(
            (h.body_len, h.keep_alive, h.expect_continue),
            (12, false, false)
        );
        let h = head("GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(!h.keep_alive);
    }

    #[test]
    fn incomplete_heads_wait_and_oversized_ones_are_refused_early() {
        assert_eq!(head("GET / HTTP/1.1\r\nHost: a\r\n"), Ok(None));
        let long = format!("GET /{} HTTP/1.1\r\n", "a".repeat(MAX_HEAD));
        assert_eq!(head(&long).unwrap_err().status, 431);
        let many: String = (0..100).map(|i| format!("X-{i}: y\r\n")).collect();
        let r = head(&format!("GET / HTTP/1.1\r\n{many}\r\n"));
        assert_eq!(r.unwrap_err().status, 431);
    }

    #[test]
    fn declared_bodies_over_the_limit_and_bad_lengths_are_refused() {
        let huge = "POST / HTTP/1.1\r\nContent-Length: 1000000000000000\r\n\r\n";
        assert_eq!(head(huge).unwrap_err().status, 413);
        let absurd = format!(
            "POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
            "9".repeat(400)
        );
        assert_eq!(head(&absurd).unwrap_err().status, 413);
        for bad in ["-1", "1e3", "", "12 3", "0x10"] {
            let r = head(&format!("POST / HTTP/1.1\r\nContent-Length: {bad}\r\n\r\n"));
            assert_eq!(r.unwrap_err().status, 400, "{bad}");
        }
        let two = "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n";
        assert_eq!(head(two).unwrap_err().status, 400);
        let chunked = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(head(chunked).unwrap_err().status, 501);
    }

    #[test]
    fn malformed_heads_are_refused() {
        for bad in [
            "GET /\r\n\r\n",
            "GET  / HTTP/1.1\r\n\r\n",
            "GET / HTTP/1.1 x\r\n\r\n",
            "G(T / HTTP/1.1\r\n\r\n",
            "GET /a\u{1}b HTTP/1.1\r\n\r\n",
            "GET / HTTP/1.1\r\nNoColon\r\n\r\n",
            "GET / HTTP/1.1\r\nBad Name: x\r\n\r\n",
            "GET / HTTP/1.1\r\n folded: x\r\n\r\n",
            "GET / HTTP/1.1\r\nX: a\u{0}b\r\n\r\n",
        ] {
            assert_eq!(head(bad).unwrap_err().status, 400, "{bad:?}");
        }
        assert_eq!(head("GET / HTTP/2.0\r\n\r\n").unwrap_err().status, 505);
        assert_eq!(
            parse_head(b"GET /\xff HTTP/1.1\r\n\r\n", 10)
                .unwrap_err()
                .status,
            400
        );
    }

    #[test]
    fn every_split_of_a_request_gives_the_same_answer_once_complete() {
        let req = b"POST /h?a=1 HTTP/1.1\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\n{}";
        let full = parse_head(req, 100).unwrap().unwrap();
        for cut in 0..req.len() {
            match parse_head(&req[..cut], 100) {
                Ok(None) => assert!(cut < full.len),
                Ok(Some(h)) => assert_eq!(h, full),
                Err(e) => panic!("{cut}: {e:?}"),
            }
        }
    }

    #[test]
    fn responses_say_their_length_and_connection() {
        let r = String::from_utf8(response(405, "no\n", false)).unwrap();
        assert!(r.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"), "{r}");
        assert!(r.contains("Content-Length: 3\r\n") && r.contains("Allow: GET, POST\r\n"));
        assert!(r.contains("Connection: close\r\n") && r.ends_with("\r\n\r\nno\n"));
    }
}
