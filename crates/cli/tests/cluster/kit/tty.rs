//! The built `nodewright` binary under a pseudo-terminal, as a person runs a terminal UI: its
//! output fed to a VT100 emulator so a test reads the screen as it stands, and keys typed
//! into the terminal.

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use portable_pty::{Child, CommandBuilder, PtySize, native_pty_system};

pub struct Tty {
    child: Box<dyn Child + Send + Sync>,
    screen: Arc<Mutex<vt100::Parser>>,
    keys: Box<dyn Write + Send>,
    // Kept open: closing the master hangs the child's terminal up.
    _master: Box<dyn portable_pty::MasterPty + Send>,
}

impl Tty {
    /// Starts `nodewright ARGS...` in a `rows` × `cols` terminal.
    pub fn spawn(args: &[&str], rows: u16, cols: u16) -> Tty {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("a pseudo-terminal opens");
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_nodewright"));
        cmd.args(args);
        cmd.env("TERM", "xterm-256color");
        let child = pair.slave.spawn_command(cmd).expect("nodewright starts");
        drop(pair.slave);
        let size = |n: u16| std::num::NonZeroU16::new(n).expect("a terminal of some size");
        let screen = Arc::new(Mutex::new(vt100::Parser::new(size(rows), size(cols), 0)));
        let mut reader = pair.master.try_clone_reader().expect("terminal reader");
        let feed = screen.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                feed.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .process(&buf[..n]);
            }
        });
        let keys = pair.master.take_writer().expect("terminal writer");
        Tty {
            child,
            screen,
            keys,
            _master: pair.master,
        }
    }

    /// The screen's text, one line per row, trailing spaces trimmed.
    pub fn screen(&self) -> String {
        let p = self.screen.lock().unwrap_or_else(|e| e.into_inner());
        let text = p.screen().contents();
        let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
        lines.join("\n")
    }

    pub fn type_keys(&mut self, keys: &str) {
        self.keys.write_all(keys.as_bytes()).expect("keys typed");
        self.keys.flush().expect("keys flushed");
    }

    /// The exit code once the process has ended, waiting up to `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<u32> {
        let start = std::time::Instant::now();
        while start.elapsed() < timeout {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status.exit_code());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Tty {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
