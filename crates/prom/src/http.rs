//! A small blocking HTTP/1.1 server, enough for Prometheus to scrape: GET (and HEAD) only,
//! one request per connection (answered with `Connection: close`), a thread per connection
//! up to a bound, the request head read within a deadline and a size cap. No body is read.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The largest request head read; a scrape's is a few hundred bytes.
pub const MAX_HEAD: usize = 16 << 10;
/// How long a client has to send its request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections served at once; more are answered 503 at once.
pub const MAX_CONNECTIONS: usize = 64;

/// One request: its method, path, query parameters (decoded) and headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub headers: Vec<(String, String)>,
}

impl Request {
    /// A header's value (names match without regard to case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// A query parameter given at most once; given twice it is an error.
    pub fn param(&self, name: &str) -> Result<Option<&str>, HttpError> {
        let mut found = self.query.iter().filter(|(k, _)| k == name);
        match (found.next(), found.next()) {
            (Some((_, v)), None) => Ok(Some(v.as_str())),
            (None, _) => Ok(None),
            (Some(_), Some(_)) => Err(HttpError::Twice(name.to_string())),
        }
    }
}

/// An answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    /// Plain text; an error's body is its one-line reason.
    pub fn text(status: u16, body: impl Into<String>) -> Response {
        let mut body = body.into();
        if !body.ends_with('\n') {
            body.push('\n');
        }
        Response {
            status,
            content_type: "text/plain; charset=utf-8".into(),
            headers: Vec::new(),
            body,
        }
    }

    /// An exposition in the text format.
    pub fn metrics(body: String) -> Response {
        Response {
            status: 200,
            content_type: crate::expo::CONTENT_TYPE.into(),
            headers: Vec::new(),
            body,
        }
    }

    pub fn html(body: String) -> Response {
        Response {
            status: 200,
            content_type: "text/html; charset=utf-8".into(),
            headers: Vec::new(),
            body,
        }
    }

    pub fn with_header(mut self, name: &str, value: impl Into<String>) -> Response {
        self.headers.push((name.into(), value.into()));
        self
    }

    fn head_bytes(&self, body_len: usize) -> Vec<u8> {
        let mut h = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {body_len}\r\nConnection: close\r\n",
            self.status,
            reason(self.status),
            self.content_type
        );
        for (k, v) in &self.headers {
            h.push_str(&format!("{k}: {v}\r\n"));
        }
        h.push_str("\r\n");
        h.into_bytes()
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Request Header Fields Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

/// What answers the requests.
pub type Handler = Arc<dyn Fn(&Request) -> Response + Send + Sync>;

pub struct Server {
    listener: TcpListener,
    handler: Handler,
    live: Arc<AtomicUsize>,
}

impl Server {
    pub fn bind(addr: impl ToSocketAddrs, handler: Handler) -> std::io::Result<Server> {
        Ok(Server {
            listener: TcpListener::bind(addr)?,
            handler,
            live: Arc::new(AtomicUsize::new(0)),
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until the process ends.
    pub fn serve(self) {
        loop {
            let sock = match self.listener.accept() {
                Ok((s, _)) => s,
                Err(_) => {
                    // out of descriptors and the like: wait instead of spinning
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            if self.live.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
                self.live.fetch_sub(1, Ordering::SeqCst);
                let busy = Response::text(503, "too many connections at once");
                let _ = write_response(&mut &sock, &busy, false);
                continue;
            }
            let (handler, live) = (self.handler.clone(), self.live.clone());
            let spawned = std::thread::Builder::new()
                .name("wr-http".into())
                .spawn(move || {
                    serve_conn(sock, &handler);
                    live.fetch_sub(1, Ordering::SeqCst);
                });
            if spawned.is_err() {
                self.live.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }

    /// Serves on a background thread.
    pub fn spawn(self) -> std::io::Result<JoinHandle<()>> {
        std::thread::Builder::new()
            .name("wr-http-accept".into())
            .spawn(move || self.serve())
    }
}

fn serve_conn(mut sock: TcpStream, handler: &Handler) {
    let response = match read_head(&mut sock) {
        Ok(head) => match parse_head(&head) {
            Ok(req) if req.method == "GET" || req.method == "HEAD" => {
                let r = handler(&req);
                let _ = write_response(&mut sock, &r, req.method == "HEAD");
                return;
            }
            Ok(_) => Response::text(405, "only GET and HEAD are served")
                .with_header("Allow", "GET, HEAD"),
            Err(e) => Response::text(400, e.to_string()),
        },
        Err((status, e)) => Response::text(status, e),
    };
    let _ = write_response(&mut sock, &response, false);
}

fn write_response(sock: &mut impl Write, r: &Response, head_only: bool) -> std::io::Result<()> {
    let mut out = r.head_bytes(r.body.len());
    if !head_only {
        out.extend_from_slice(r.body.as_bytes());
    }
    sock.write_all(&out)?;
    sock.flush()
}

/// Reads up to the blank line that ends the head, within [`HEAD_TIMEOUT`] and [`MAX_HEAD`].
fn read_head(sock: &mut TcpStream) -> Result<Vec<u8>, (u16, String)> {
    let deadline = Instant::now() + HEAD_TIMEOUT;
    let _ = sock.set_write_timeout(Some(HEAD_TIMEOUT));
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 2048];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err((408, "the request head did not arrive in time".into()));
        }
        let _ = sock.set_read_timeout(Some(left));
        let n = match sock.read(&mut buf) {
            Ok(0) => return Err((400, "the connection closed within the request head".into())),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return Err((408, "the request head did not arrive in time".into())),
        };
        head.extend_from_slice(&buf[..n]);
        if let Some(end) = find_end(&head) {
            head.truncate(end);
            return Ok(head);
        }
        if head.len() > MAX_HEAD {
            return Err((413, format!("the request head is over {MAX_HEAD} bytes")));
        }
    }
}

fn find_end(head: &[u8]) -> Option<usize> {
    head.windows(4).position(|w| w == b"\r\n\r\n").or_else(|| {
        // a bare LF line ending, as some hand-written clients send
        head.windows(2).position(|w| w == b"\n\n")
    })
}

/// Parses a request head (the lines before the blank one).
pub fn parse_head(head: &[u8]) -> Result<Request, HttpError> {
    let text = std::str::from_utf8(head).map_err(|_| HttpError::HeadNotUtf8)?;
    let mut lines = text.split('\n').map(|l| l.trim_end_matches('\r'));
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HttpError::RequestLine);
    };
    if !version.starts_with("HTTP/1.") {
        return Err(HttpError::Version(version.to_string()));
    }
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(HttpError::Method);
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if !path.starts_with('/') {
        return Err(HttpError::Target);
    }
    let mut headers = Vec::new();
    for line in lines.filter(|l| !l.is_empty()) {
        let Some((k, v)) = line.split_once(':') else {
            return Err(HttpError::Header);
        };
        headers.push((k.trim().to_string(), v.trim().to_string()));
    }
    Ok(Request {
        method: method.into(),
        path: decode(path)?,
        query: parse_query(query)?,
        headers,
    })
}

/// `a=1&b=x%20y`: the pairs, decoded ('+' is a space).
pub fn parse_query(q: &str) -> Result<Vec<(String, String)>, HttpError> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            Ok((decode(&k.replace('+', " "))?, decode(&v.replace('+', " "))?))
        })
        .collect()
}

/// Percent-decoding; a bad escape or bytes that are not UTF-8 are errors.
pub fn decode(s: &str) -> Result<String, HttpError> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| HttpError::Escape(s.to_string()))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| HttpError::DecodedNotUtf8(s.to_string()))
}

/// Why a request is refused with 400, in the words its answer carries.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    #[error("the request head is not UTF-8")]
    HeadNotUtf8,
    #[error("the request line is not METHOD TARGET VERSION")]
    RequestLine,
    #[error("'{0}' is not HTTP/1.x")]
    Version(String),
    #[error("the method is not a word in capitals")]
    Method,
    #[error("the target is not a path")]
    Target,
    #[error("a header line without ':'")]
    Header,
    #[error("a bad %-escape in '{0}'")]
    Escape(String),
    #[error("'{0}' does not decode to UTF-8")]
    DecodedNotUtf8(String),
    /// A query parameter given more than once.
    #[error("'{0}' is given more than once")]
    Twice(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scrape_request_is_parsed() {
        let r = parse_head(
            b"GET /probe?target=10.0.0.1%3A5350&seconds=2&module=wan+a HTTP/1.1\r\n\
              Host: x\r\nX-Prometheus-Scrape-Timeout-Seconds: 10\r\n",
        )
        .unwrap();
        assert_eq!(r.method, "GET");
        assert_eq!(r.path, "/probe");
        assert_eq!(r.param("target"), Ok(Some("10.0.0.1:5350")));
        assert_eq!(r.param("module"), Ok(Some("wan a")));
        assert_eq!(r.param("udp"), Ok(None));
        assert_eq!(r.header("x-prometheus-scrape-timeout-seconds"), Some("10"));
    }

    #[test]
    fn bad_heads_are_refused_with_a_reason() {
        for (head, words) in [
            (&b"GET /probe\r\n"[..], "METHOD TARGET VERSION"),
            (b"GET /p HTTP/2\r\n", "not HTTP/1.x"),
            (b"get /p HTTP/1.1\r\n", "capitals"),
            (b"GET p HTTP/1.1\r\n", "not a path"),
            (b"GET /p?a=%zz HTTP/1.1\r\n", "%-escape"),
            (b"GET /p?a=%ff HTTP/1.1\r\n", "UTF-8"),
            (b"GET /p HTTP/1.1\r\nno colon\r\n", "without ':'"),
        ] {
            let e = parse_head(head).unwrap_err().to_string();
            assert!(e.contains(words), "{e}");
        }
    }

    proptest::proptest! {
        /// Whatever a client sends, the parser answers a request or a reason, never a panic;
        /// and what it decodes, it decodes back from its own encoding.
        #[test]
        fn any_head_is_parsed_or_refused(head in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            let _ = parse_head(&head);
        }

        #[test]
        fn any_text_survives_a_round_trip_through_the_query(k in "[a-z]{1,8}", v in "\\PC{0,32}") {
            let enc: String = v.bytes().map(|b| format!("%{b:02X}")).collect();
            let q = parse_query(&format!("{k}={enc}")).unwrap();
            proptest::prop_assert_eq!(q, vec![(k, v)]);
        }
    }

    #[test]
    fn a_parameter_given_twice_is_an_error() {
        let r = parse_head(b"GET /probe?target=a&target=b HTTP/1.1\r\n").unwrap();
        assert!(r
            .param("target")
            .unwrap_err()
            .to_string()
            .contains("more than once"));
    }

    #[test]
    fn a_real_connection_gets_its_answer_and_a_close() {
        let handler: Handler = Arc::new(|r: &Request| match r.path.as_str() {
            "/metrics" => Response::metrics("x_up 1\n".into()),
            _ => Response::text(404, "no such page"),
        });
        let server = Server::bind("127.0.0.1:0", handler).unwrap();
        let addr = server.local_addr().unwrap();
        server.spawn().unwrap();
        let get = |req: &str| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s.write_all(req.as_bytes()).unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).unwrap();
            out
        };
        let ok = get("GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains("Content-Type: text/plain; version=0.0.4"));
        assert!(ok.contains("Content-Length: 7\r\n") && ok.ends_with("\r\n\r\nx_up 1\n"));
        assert!(get("GET /nope HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404 "));
        let post = get("POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
        assert!(post.starts_with("HTTP/1.1 405 ") && post.contains("Allow: GET, HEAD"));
        let head = get("HEAD /metrics HTTP/1.1\r\n\r\n");
        assert!(head.contains("Content-Length: 7\r\n") && head.ends_with("\r\n\r\n"));
        assert!(get("nonsense\r\n\r\n").starts_with("HTTP/1.1 400 "));
    }
}
