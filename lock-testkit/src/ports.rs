//! Free loopback ports: the workspace's only way to pick one.

use std::io;
use std::net::{Ipv4Addr, TcpListener};

/// Returns `n` distinct loopback ports that were free a moment ago. Ports can be stolen
/// before a server binds them: callers retry on `Address already in use`, or use a port
/// nothing should listen on only to see a connection refused.
///
/// # Errors
/// When the system has no ephemeral port to give.
pub fn free_ports(n: usize) -> io::Result<Vec<u16>> {
    // Hold every listener until all are picked so the ports are distinct.
    let listeners = (0..n)
        .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
        .collect::<io::Result<Vec<_>>>()?;
    listeners
        .iter()
        .map(|l| Ok(l.local_addr()?.port()))
        .collect()
}

/// A loopback port that refuses connections for as long as this lives: bound and never
/// listening, so no server another test starts meanwhile can take it (a port that was only
/// free a moment ago can be, and then answers or resets instead of refusing).
#[derive(Debug)]
pub struct ClosedPort {
    _socket: tokio::net::TcpSocket,
    port: u16,
}

impl ClosedPort {
    /// Binds one.
    ///
    /// # Panics
    /// When the system has no ephemeral port to give.
    pub fn bind() -> Self {
        let bind = || {
            let socket = tokio::net::TcpSocket::new_v4()?;
            socket.bind((Ipv4Addr::LOCALHOST, 0).into())?;
            let port = socket.local_addr()?.port();
            io::Result::Ok(Self {
                _socket: socket,
                port,
            })
        };
        bind().unwrap_or_else(|e| panic!("binding a closed loopback port: {e}"))
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }
}

/// One loopback port that was free a moment ago (see [`free_ports`]).
///
/// # Panics
/// When the system has no ephemeral port to give.
pub fn free_port() -> u16 {
    free_ports(1).unwrap_or_else(|e| panic!("picking a free loopback port: {e}"))[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_port_refuses() {
        let closed = ClosedPort::bind();
        let refused = std::net::TcpStream::connect((Ipv4Addr::LOCALHOST, closed.port()));
        assert_eq!(
            refused.unwrap_err().kind(),
            io::ErrorKind::ConnectionRefused
        );
    }

    #[test]
    fn ports_are_distinct_and_not_listening() {
        let mut ports = free_ports(8).unwrap();
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 8);
        let port = free_port();
        assert!(std::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err());
    }
}
