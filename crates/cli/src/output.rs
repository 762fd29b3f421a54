//! Writing results to standard output without panicking when the reader goes away
//! (`nodewright crds | head` closes the pipe early; that is not an error).

use std::io::{ErrorKind, Write};

/// Writes `text` to stdout. A closed pipe ends the output quietly.
pub fn emit(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// Writes `line` and a newline to stdout; see [`emit`].
pub fn emit_line(line: &str) -> anyhow::Result<()> {
    emit(&format!("{line}\n"))
}
