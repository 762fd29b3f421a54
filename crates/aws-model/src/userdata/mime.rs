//! MIME multi-part archives, as cloud-init and nodeadm read them: enough to split a user's
//! archive into parts and to write one with a fixed boundary so identical inputs give
//! identical bytes (and identical launch-template hashes).

use super::UserDataError;

/// The boundary of every archive this crate writes.
pub const BOUNDARY: &str = "//";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MimePart {
    pub content_type: String,
    /// The part's other header lines (`Content-Transfer-Encoding: base64`, ...), kept as
    /// written so the part still decodes the same way.
    pub other_headers: Vec<String>,
    pub content: String,
}

impl MimePart {
    pub fn new(content_type: &str, content: &str) -> Self {
        MimePart {
            content_type: content_type.to_string(),
            other_headers: Vec::new(),
            content: content.to_string(),
        }
    }
}

/// Whether `s` is a MIME document rather than a bare script or config: it starts with a
/// `MIME-Version` or `Content-Type` header.
pub fn is_mime(s: &str) -> bool {
    let s = s.trim_start();
    ["mime-version:", "content-type:"]
        .iter()
        .any(|h| s.get(..h.len()).is_some_and(|p| p.eq_ignore_ascii_case(h)))
}

fn header<'a>(lines: &[&'a str], name: &str) -> Option<&'a str> {
    lines.iter().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn boundary_of(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| v.trim().trim_matches('"').to_string())
    })
}

/// Splits a multipart document into its parts, keeping each part's content type (default
/// `text/plain`) and body.
pub fn parse(doc: &str) -> Result<Vec<MimePart>, UserDataError> {
    let doc = doc.replace("\r\n", "\n");
    let lines: Vec<&str> = doc.trim_start().lines().collect();
    let blank = lines
        .iter()
        .position(|l| l.trim().is_empty())
        .ok_or_else(|| UserDataError::Mime("no blank line after the MIME headers".into()))?;
    let content_type = header(&lines[..blank], "content-type")
        .ok_or_else(|| UserDataError::Mime("no Content-Type header".into()))?;
    if !content_type.to_ascii_lowercase().starts_with("multipart/") {
        return Err(UserDataError::Mime(format!(
            "Content-Type {content_type:?} is not multipart"
        )));
    }
    let boundary = boundary_of(content_type)
        .filter(|b| !b.is_empty())
        .ok_or_else(|| UserDataError::Mime("multipart Content-Type has no boundary".into()))?;
    let open = format!("--{boundary}");
    let close = format!("--{boundary}--");

    let mut parts = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    let mut closed = false;
    for line in &lines[blank + 1..] {
        let l = line.trim_end();
        if l == close || l == open {
            if let Some(body) = current.take() {
                parts.push(part(&body)?);
            }
            if l == close {
                closed = true;
                break;
            }
            current = Some(Vec::new());
        } else if let Some(body) = current.as_mut() {
            body.push(line);
        }
    }
    if !closed {
        return Err(UserDataError::Mime(format!(
            "archive is not closed with {close:?}"
        )));
    }
    Ok(parts)
}

fn part(lines: &[&str]) -> Result<MimePart, UserDataError> {
    let blank = lines
        .iter()
        .position(|l| l.trim().is_empty())
        .ok_or_else(|| UserDataError::Mime("a part has no blank line after its headers".into()))?;
    let headers = &lines[..blank];
    let content_type = header(headers, "content-type").unwrap_or("text/plain");
    let mut part = MimePart::new(content_type, &lines[blank + 1..].join("\n"));
    part.other_headers = headers
        .iter()
        .filter(|l| {
            l.split_once(':')
                .is_none_or(|(k, _)| !k.trim().eq_ignore_ascii_case("content-type"))
        })
        .map(|l| l.to_string())
        .collect();
    Ok(part)
}

/// Writes the parts as `multipart/mixed` with [`BOUNDARY`].
pub fn serialize(parts: &[MimePart]) -> String {
    let mut out =
        format!("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\n\n");
    for p in parts {
        out.push_str(&format!("--{BOUNDARY}\nContent-Type: {}\n", p.content_type));
        for h in &p.other_headers {
            out.push_str(h);
            out.push('\n');
        }
        out.push_str(&format!("\n{}\n", p.content.trim_end_matches('\n')));
    }
    out.push_str(&format!("--{BOUNDARY}--\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_foreign_boundary() {
        let parts = vec![
            MimePart::new(
                "text/x-shellscript; charset=\"us-ascii\"",
                "#!/bin/bash\necho hi",
            ),
            MimePart::new("application/node.eks.aws", "kind: NodeConfig"),
        ];
        let doc = serialize(&parts);
        assert!(is_mime(&doc));
        assert_eq!(parse(&doc).unwrap(), parts);

        let foreign = "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=BOUNDARY\r\n\r\n--BOUNDARY\r\nContent-Type: text/x-shellscript\r\n\r\necho one\r\necho two\r\n--BOUNDARY--\r\n";
        let p = parse(foreign).unwrap();
        assert_eq!(
            p,
            vec![MimePart::new("text/x-shellscript", "echo one\necho two")]
        );
    }

    #[test]
    fn malformed_archives_are_errors() {
        assert!(parse("MIME-Version: 1.0\nContent-Type: text/plain\n\nhi").is_err());
        assert!(parse("MIME-Version: 1.0\nContent-Type: multipart/mixed\n\nhi").is_err());
        assert!(
            parse("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=x\n\n--x\n\nhi\n")
                .is_err()
        );
    }
}
