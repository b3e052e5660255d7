//! A minimal HTTP/1.1 client over `std::net` for the failure-contract rows: one request per
//! connection (`Connection: close`), the whole answer read, a chunked body decoded.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Longest wait for one answer.
const TIMEOUT: Duration = Duration::from_secs(30);

/// An HTTP answer.
#[derive(Debug, Default)]
pub(crate) struct Answer {
    /// The status code.
    pub(crate) status: u16,
    /// Header (lower-cased name, value) pairs in order.
    pub(crate) headers: Vec<(String, String)>,
    /// The body (decoded when chunked).
    pub(crate) body: String,
}

impl Answer {
    /// The first value of header `name` (lower-case), if any.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC message of the body: the body itself, or the last SSE `data:` line that is
    /// a response (has an `id` and a `result` or an `error`).
    pub(crate) fn json_rpc(&self) -> serde_json::Value {
        if let Ok(value) = serde_json::from_str(&self.body) {
            return value;
        }
        self.body
            .lines()
            .rev()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str::<serde_json::Value>(data.trim()).ok())
            .find(|message| message.get("result").is_some() || message.get("error").is_some())
            .unwrap_or(serde_json::Value::Null)
    }
}

/// Sends `method path` with `headers` and `body` to `addr` and reads the answer.
pub(crate) fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> Result<Answer, String> {
    let fail = |e: std::io::Error| format!("{method} {path}: {e}");
    let mut stream = TcpStream::connect_timeout(&addr, TIMEOUT).map_err(fail)?;
    stream.set_read_timeout(Some(TIMEOUT)).map_err(fail)?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).map_err(fail)?;
    // The server may answer (413, 431) and close before reading a large body: not an error.
    let _ = stream.write_all(body);
    let mut raw = Vec::new();
    // A reset after a complete early answer is fine too; what was read is what counts.
    let _ = stream.read_to_end(&mut raw);
    parse(&raw).ok_or_else(|| format!("{method} {path}: no HTTP answer"))
}

fn parse(raw: &[u8]) -> Option<Answer> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let rest = &raw[end + 4..];
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_vec()
    };
    Some(Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// Decodes a chunked body (as much of it as is there).
fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    while let Some(line_end) = rest.windows(2).position(|w| w == b"\r\n") {
        let size_text = String::from_utf8_lossy(&rest[..line_end]);
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let Ok(size) = usize::from_str_radix(size_text, 16) else {
            break;
        };
        rest = &rest[line_end + 2..];
        if size == 0 || rest.len() < size {
            body.extend_from_slice(&rest[..size.min(rest.len())]);
            break;
        }
        body.extend_from_slice(&rest[..size]);
        rest = rest.get(size + 2..).unwrap_or_default();
    }
    body
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn a_chunked_answer_is_decoded_and_headers_are_lower_cased() {
        let raw = b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n\
                    Transfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n3\r\n 1}\r\n0\r\n\r\n";
        let answer = parse(raw).expect("an answer");
        assert_eq!(answer.status, 404);
        assert_eq!(answer.header("content-type"), Some("application/json"));
        assert_eq!(answer.body, "{\"a\": 1}");
        assert_eq!(answer.json_rpc()["a"], 1);
    }
}
