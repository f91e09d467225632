//! Connections per peer IP address, on one listener. The API server opens few connections, and a
//! pod has one IP address, so one noisy client cannot take all of a listener's connection slots:
//! a connection beyond its address's share is closed at once (it does not wait in the backlog
//! like connections beyond the listener's cap, which would let it hold a queue position).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Open connections per address, capped.
#[derive(Debug)]
pub(crate) struct PeerCap {
    limit: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

impl PeerCap {
    pub(crate) fn new(limit: usize) -> Arc<Self> {
        Arc::new(PeerCap { limit, open: Mutex::new(HashMap::new()) })
    }

    /// A slot for one more connection from `ip`, or `None` when it already has `limit`.
    pub(crate) fn try_take(self: &Arc<Self>, ip: IpAddr) -> Option<PeerSlot> {
        let ip = canonical(ip);
        let mut open = self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = open.entry(ip).or_insert(0);
        if *count >= self.limit {
            return None;
        }
        *count += 1;
        Some(PeerSlot { cap: self.clone(), ip })
    }

    /// Open connections from `ip`.
    #[cfg(test)]
    fn open(&self, ip: IpAddr) -> usize {
        let open = self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        open.get(&canonical(ip)).copied().unwrap_or(0)
    }
}

/// An IPv4 address seen through an IPv6 socket counts as itself.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// One connection's share of its address's slots; given back when dropped.
#[derive(Debug)]
pub(crate) struct PeerSlot {
    cap: Arc<PeerCap>,
    ip: IpAddr,
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut open = self.cap.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_address_gets_its_share_and_gets_it_back() {
        let cap = PeerCap::new(2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let a1 = cap.try_take(a).unwrap();
        let _a2 = cap.try_take(a).unwrap();
        assert!(cap.try_take(a).is_none(), "a third from the same address");
        assert!(cap.try_take("::ffff:10.0.0.1".parse().unwrap()).is_none(), "the same address, IPv4-mapped");
        let _b1 = cap.try_take(b).expect("another address is not affected");
        drop(a1);
        assert_eq!(cap.open(a), 1);
        assert!(cap.try_take(a).is_some(), "a slot came back");
    }
}
