//! A small HTTP proxy on 127.0.0.1 in front of moto for the EC2 answers moto cannot give: a
//! request whose form body the `answer` function recognises gets that canned EC2 XML (with
//! its HTTP status, so EC2's error answers can be given too); every
//! other request goes to moto, and moto's reply body passes through `rewrite` (to add fields
//! moto does not model). A request line the `rest` function recognises (REST-JSON APIs moto
//! lacks, such as ARC zonal shift) gets that canned JSON. One request per connection; every
//! form body and every request line is recorded.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub type Answer = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;
/// Like [`Answer`], with the HTTP status to answer with.
pub type Reply = Arc<dyn Fn(&str) -> Option<(u16, String)> + Send + Sync>;
pub type Rewrite = Arc<dyn Fn(&str, String) -> String + Send + Sync>;
/// By request line (`GET /managedresources/... HTTP/1.1`): the HTTP status and JSON body.
pub type RestReply = Arc<dyn Fn(&str) -> Option<(u16, String)> + Send + Sync>;

pub struct Proxy {
    pub url: String,
    /// Every request's form body, in arrival order.
    pub requests: Arc<Mutex<Vec<String>>>,
    /// Every request's first line (method, path and query), in arrival order.
    pub lines: Arc<Mutex<Vec<String>>>,
}

impl Proxy {
    /// The recorded request lines that contain `needle`.
    pub fn requested(&self, needle: &str) -> Vec<String> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(needle))
            .cloned()
            .collect()
    }

    /// The recorded form bodies that contain `needle`.
    pub fn sent(&self, needle: &str) -> Vec<String> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|f| f.contains(needle))
            .cloned()
            .collect()
    }
}

/// Reads one HTTP/1.1 message (headers, then a Content-Length body).
async fn read_message(s: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let length = content_length(&head).unwrap_or(0);
    while buf.len() < head_end + length {
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some((head, buf[head_end..head_end + length].to_vec()))
}

fn content_length(head: &str) -> Option<usize> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("content-length")
            .then(|| v.trim().parse::<usize>().ok())?
    })
}

fn reply(status_line: &str, content_type: &str, body: &str) -> String {
    format!(
        "{status_line}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

async fn forward(upstream: &str, head: &str, body: &[u8]) -> Option<Vec<u8>> {
    let mut lines: Vec<String> = head
        .split("\r\n")
        .filter(|l| !l.is_empty() && !l.to_ascii_lowercase().starts_with("connection:"))
        .map(str::to_string)
        .collect();
    lines.push("Connection: close".into());
    let mut raw = format!("{}\r\n\r\n", lines.join("\r\n")).into_bytes();
    raw.extend_from_slice(body);
    let mut up = TcpStream::connect(upstream).await.ok()?;
    up.write_all(&raw).await.ok()?;
    let mut answer = Vec::new();
    let _ = up.read_to_end(&mut answer).await;
    Some(answer)
}

/// Rewrites the body of a raw HTTP answer, keeping its status line and content type.
fn rewritten(answer: &[u8], form: &str, rewrite: &Rewrite) -> Vec<u8> {
    let Some(i) = answer.windows(4).position(|w| w == b"\r\n\r\n") else {
        return answer.to_vec();
    };
    let head = String::from_utf8_lossy(&answer[..i]).to_string();
    let body = String::from_utf8_lossy(&answer[i + 4..]).to_string();
    let status = head.lines().next().unwrap_or("HTTP/1.1 200 OK").to_string();
    let content_type = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-type")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_else(|| "text/xml".into());
    reply(&status, &content_type, &rewrite(form, body)).into_bytes()
}

/// A proxy whose canned answers are all successes.
pub async fn start(moto_url: &str, answer: Answer, rewrite: Rewrite) -> Proxy {
    start_replies(
        moto_url,
        Arc::new(move |form| Some((200, answer(form)?))),
        rewrite,
    )
    .await
}

/// A proxy whose canned answers carry their own HTTP status.
pub async fn start_replies(moto_url: &str, answer: Reply, rewrite: Rewrite) -> Proxy {
    serve(moto_url, answer, Arc::new(|_| None), rewrite).await
}

/// A proxy answering REST-JSON requests `rest` recognises; everything else goes to moto.
pub async fn start_rest(moto_url: &str, rest: RestReply) -> Proxy {
    serve(moto_url, Arc::new(|_| None), rest, unchanged()).await
}

async fn serve(moto_url: &str, answer: Reply, rest: RestReply, rewrite: Rewrite) -> Proxy {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let upstream = moto_url.trim_start_matches("http://").to_string();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let lines = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    let seen_lines = lines.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut client, _)) = listener.accept().await else {
                return;
            };
            let (upstream, seen, seen_lines) = (upstream.clone(), seen.clone(), seen_lines.clone());
            let (answer, rest, rewrite) = (answer.clone(), rest.clone(), rewrite.clone());
            tokio::spawn(async move {
                let Some((head, body)) = read_message(&mut client).await else {
                    return;
                };
                let form = String::from_utf8_lossy(&body).to_string();
                seen.lock().unwrap().push(form.clone());
                let line = head.lines().next().unwrap_or_default().to_string();
                seen_lines.lock().unwrap().push(line.clone());
                if let Some((code, json)) = rest(&line) {
                    let status = match code {
                        200 => "HTTP/1.1 200 OK".to_string(),
                        _ => format!("HTTP/1.1 {code} Error"),
                    };
                    let r = reply(&status, "application/json", &json);
                    let _ = client.write_all(r.as_bytes()).await;
                    return;
                }
                if let Some((code, xml)) = answer(&form) {
                    let status = match code {
                        200 => "HTTP/1.1 200 OK".to_string(),
                        _ => format!("HTTP/1.1 {code} Bad Request"),
                    };
                    let r = reply(&status, "text/xml;charset=UTF-8", &xml);
                    let _ = client.write_all(r.as_bytes()).await;
                    return;
                }
                let Some(got) = forward(&upstream, &head, &body).await else {
                    return;
                };
                let _ = client.write_all(&rewritten(&got, &form, &rewrite)).await;
            });
        }
    });
    Proxy {
        url,
        requests,
        lines,
    }
}

/// No canned answers.
pub fn no_answers() -> Answer {
    Arc::new(|_| None)
}

/// moto's replies unchanged.
pub fn unchanged() -> Rewrite {
    Arc::new(|_, body| body)
}

/// An EC2 Query API error body with `code` and `message`, as EC2 answers a refused request.
pub fn error_xml(code: &str, message: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code>\
<Message>{message}</Message></Error></Errors><RequestID>7c5b4a4e-0000-4000-8000-0000000000dd</RequestID></Response>"
    )
}

/// The value of `key` in a recorded form body, percent-decoded (`+` is a space).
pub fn form_value(form: &str, key: &str) -> Option<String> {
    let raw = form
        .split('&')
        .find_map(|p| p.strip_prefix(key)?.strip_prefix('='))?;
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}
