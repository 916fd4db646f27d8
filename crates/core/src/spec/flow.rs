//! The rules about flows, defined once: which side sends on a flow, the order in which a
//! test's streams are opened (and matched to their data sockets), and the words used for a
//! flow or a direction in headers, logs and errors.

use super::{Direction, Flow, TestSpec};
use crate::side_report::Role;

/// One end of a test: the client connects, the server listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    Client,
    Server,
}

impl Side {
    /// What this side does with a stream of `flow`.
    pub fn role(self, flow: Flow) -> Role {
        if flow.sender() == self {
            Role::Sender
        } else {
            Role::Receiver
        }
    }
}

impl Flow {
    /// The side that sends on a stream of this flow.
    pub fn sender(self) -> Side {
        match self {
            Flow::ClientToServer => Side::Client,
            Flow::ServerToClient => Side::Server,
        }
    }

    /// Whether the client is the sender of this flow.
    pub fn sender_is_client(self) -> bool {
        self.sender() == Side::Client
    }

    /// The flow's compact name, as interval lines start with it: `client→server`.
    pub fn name(self) -> &'static str {
        match self {
            Flow::ClientToServer => "client→server",
            Flow::ServerToClient => "server→client",
        }
    }

    /// The flow in a heading or a table: `client → server`.
    pub fn describe(self) -> &'static str {
        match self {
            Flow::ClientToServer => "client → server",
            Flow::ServerToClient => "server → client",
        }
    }

    /// The flow where space is short: `c→s`.
    pub fn short(self) -> &'static str {
        match self {
            Flow::ClientToServer => "c→s",
            Flow::ServerToClient => "s→c",
        }
    }

    /// The flow in a sentence (errors, log lines): `client to server`.
    pub fn words(self) -> &'static str {
        match self {
            Flow::ClientToServer => "client to server",
            Flow::ServerToClient => "server to client",
        }
    }
}

impl Direction {
    /// Every stream of a test of this direction with `parallel` streams per flow, in the
    /// order the client opens them and the server matches them: flow by flow (the client's
    /// sending flow first), then by stream id. iperf3 numbers its streams in this order too.
    pub fn stream_order(self, parallel: u32) -> impl Iterator<Item = (Flow, u32)> {
        self.flows()
            .iter()
            .flat_map(move |&f| (0..parallel).map(move |i| (f, i)))
    }

    /// The direction in a test's header line.
    pub fn describe(self) -> &'static str {
        match self {
            Direction::Forward => Flow::ClientToServer.describe(),
            Direction::Reverse => "server → client (reverse)",
            Direction::Bidir => "both directions",
        }
    }

    /// The direction in a sentence (log lines): `client to server`, `both ways`.
    pub fn words(self) -> &'static str {
        match self {
            Direction::Forward => Flow::ClientToServer.words(),
            Direction::Reverse => Flow::ServerToClient.words(),
            Direction::Bidir => "both ways",
        }
    }
}

/// Every (flow, stream id) of `spec`, in the order streams are opened and matched.
pub fn stream_order(spec: &TestSpec) -> Vec<(Flow, u32)> {
    spec.direction.stream_order(spec.parallel).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_sends_client_to_server_and_the_server_the_other_way() {
        assert!(Flow::ClientToServer.sender_is_client());
        assert!(!Flow::ServerToClient.sender_is_client());
        assert_eq!(Side::Client.role(Flow::ClientToServer), Role::Sender);
        assert_eq!(Side::Client.role(Flow::ServerToClient), Role::Receiver);
        assert_eq!(Side::Server.role(Flow::ClientToServer), Role::Receiver);
        assert_eq!(Side::Server.role(Flow::ServerToClient), Role::Sender);
        // the two sides always disagree
        for f in [Flow::ClientToServer, Flow::ServerToClient] {
            assert_ne!(Side::Client.role(f), Side::Server.role(f));
        }
    }

    #[test]
    fn streams_are_ordered_flow_by_flow_then_by_id() {
        let spec = TestSpec {
            direction: Direction::Bidir,
            parallel: 2,
            ..Default::default()
        };
        assert_eq!(
            stream_order(&spec),
            vec![
                (Flow::ClientToServer, 0),
                (Flow::ClientToServer, 1),
                (Flow::ServerToClient, 0),
                (Flow::ServerToClient, 1),
            ]
        );
        let rev: Vec<_> = Direction::Reverse.stream_order(3).collect();
        assert_eq!(
            rev,
            vec![
                (Flow::ServerToClient, 0),
                (Flow::ServerToClient, 1),
                (Flow::ServerToClient, 2)
            ]
        );
        assert_eq!(Direction::Forward.stream_order(0).count(), 0);
    }

    #[test]
    fn wording_of_flows_and_directions() {
        assert_eq!(Flow::ClientToServer.name(), "client→server");
        assert_eq!(Flow::ServerToClient.describe(), "server → client");
        assert_eq!(Flow::ServerToClient.short(), "s→c");
        assert_eq!(Flow::ClientToServer.words(), "client to server");
        assert_eq!(Direction::Forward.describe(), "client → server");
        assert_eq!(Direction::Reverse.describe(), "server → client (reverse)");
        assert_eq!(Direction::Bidir.describe(), "both directions");
        assert_eq!(Direction::Reverse.words(), "server to client");
        assert_eq!(Direction::Bidir.words(), "both ways");
    }
}
