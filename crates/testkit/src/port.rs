//! A port on 127.0.0.1 for a server a test starts.
//!
//! Binding port 0 and releasing it hands out a port from the kernel's ephemeral range, the
//! range every outgoing connection's local port is also taken from; with control planes, kube
//! clients and `kubectl` busy beside it, a port so found was at times taken by someone else
//! before the server it was meant for could bind it. Ports here come from below that range
//! (Linux's default starts at 32768), where only servers given a port explicitly live, at a
//! random place so that test processes running side by side do not try the same ones.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::net::TcpListener;

/// The ports handed out: below the kernel's default ephemeral range.
const PORTS: std::ops::Range<u16> = 20_000..32_768;

/// A TCP port on 127.0.0.1 that nothing listens on now. Not deterministic, unlike the rest of
/// this crate: it depends on what else runs on the machine.
pub fn free_port() -> u16 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    first_free_from(hasher.finish())
}

/// The first port of [`PORTS`] nothing listens on, counting round from the one `start` picks.
fn first_free_from(start: u64) -> u16 {
    let span = u64::from(PORTS.end - PORTS.start);
    (0..span)
        .map(|i| PORTS.start + ((start + i) % span) as u16)
        .find(|&port| TcpListener::bind(("127.0.0.1", port)).is_ok())
        .expect("a free port on 127.0.0.1 between 20000 and 32767")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_is_below_the_ephemeral_range_and_free() {
        let port = free_port();
        assert!(PORTS.contains(&port));
        TcpListener::bind(("127.0.0.1", port)).expect("the port is free");
    }

    #[test]
    fn a_port_held_is_passed_over() {
        let start = u64::from(free_port() - PORTS.start);
        let held = TcpListener::bind(("127.0.0.1", first_free_from(start))).expect("free");
        let port = first_free_from(start);
        assert_ne!(port, held.local_addr().unwrap().port());
        TcpListener::bind(("127.0.0.1", port)).expect("the port is free");
    }
}
