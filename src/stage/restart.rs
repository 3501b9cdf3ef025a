//! The exit of an exactly-once stage whose open transaction cannot commit.
//!
//! When a broker dies, the Kafka client can leave the open transaction in a state it leaves
//! only by an abort: an error that requires one, an output or changelog record of the
//! transaction not acknowledged, or (the watchdog, [`super::watchdog`]) a transaction call
//! that never returns. Nothing of that transaction is visible to a `read_committed` reader,
//! and its records are already in the index. A restart is the recovery: it fences this
//! process's transactional id (the broker aborts the transaction, if it has not yet),
//! brings the index back to the last committed transaction, and decides the records again
//! from the committed positions. So the process exits with [`EXIT_DECIDE_AGAIN`], a code an
//! orchestrator's restart is the answer to; any other failure exits with 2.

use rdkafka::error::{KafkaError, RDKafkaErrorCode};

/// The exit code of an exactly-once process whose open transaction could not commit.
pub const EXIT_DECIDE_AGAIN: u8 = 3;

/// Exactly-once: the open transaction cannot commit after a fault of the brokers; a restart
/// decides its records again.
#[derive(Debug)]
pub struct DecideAgain(pub String);

impl std::fmt::Display for DecideAgain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exactly-once: {}; the open transaction cannot commit (the broker aborts it): \
             the process exits (code {EXIT_DECIDE_AGAIN}) so that a restart decides its \
             records again from the committed positions",
            self.0
        )
    }
}

impl std::error::Error for DecideAgain {}

/// The process's exit code for a stage that stopped with `e`.
pub fn exit_code(e: &anyhow::Error) -> u8 {
    if e.chain().any(|c| c.is::<DecideAgain>()) {
        EXIT_DECIDE_AGAIN
    } else {
        2
    }
}

/// Whether a record's delivery failed on a fault of the brokers (one gone, a leader moving,
/// too few in-sync replicas, the client's own timeout or purge), rather than on a refusal a
/// restart would meet again (authorisation, an unknown topic, a record too large).
pub fn broker_fault(e: &KafkaError) -> bool {
    use RDKafkaErrorCode as C;
    if let KafkaError::Transaction(t) = e {
        // an abort the client asks for after a broker fault, or after the group's
        // coordinator moved (the offsets committed in the transaction name a member or a
        // generation the new coordinator does not know); not after a refusal
        return t.txn_requires_abort()
            && (fault(t.code())
                || matches!(
                    t.code(),
                    C::IllegalGeneration
                        | C::UnknownMemberId
                        | C::FencedInstanceId
                        | C::RebalanceInProgress
                ));
    }
    e.rdkafka_error_code().is_some_and(fault)
}

/// The codes of a broker's fault, and the client's own timeouts and purges; and the
/// client's refusal of a record while the transaction waits for an abort after one.
fn fault(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        code,
        C::MessageTimedOut
            | C::PurgeQueue
            | C::PurgeInflight
            | C::RequestTimedOut
            | C::OperationTimedOut
            | C::TimedOutQueue
            | C::NotEnoughReplicas
            | C::NotEnoughReplicasAfterAppend
            | C::NotLeaderForPartition
            | C::LeaderNotAvailable
            | C::NetworkException
            | C::KafkaStorageError
            | C::OutOfOrderSequenceNumber
            | C::UnknownProducerId
            | C::BrokerTransportFailure
            | C::AllBrokersDown
            | C::NotCoordinator
            | C::CoordinatorNotAvailable
            | C::CoordinatorLoadInProgress
            | C::State
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn a_transaction_that_cannot_commit_exits_with_its_own_code_through_any_context() {
        let e = anyhow::Error::new(DecideAgain("an output was not acknowledged".into()))
            .context("the stage stopped");
        assert_eq!(exit_code(&e), EXIT_DECIDE_AGAIN);
        let other = Err::<(), _>(anyhow::anyhow!("cannot open the index"))
            .context("start")
            .unwrap_err();
        assert_eq!(exit_code(&other), 2);
    }

    #[test]
    fn broker_faults_are_told_from_refusals() {
        use RDKafkaErrorCode as C;
        for c in [
            C::MessageTimedOut,
            C::NotEnoughReplicas,
            C::PurgeInflight,
            C::State,
        ] {
            assert!(broker_fault(&KafkaError::MessageProduction(c)), "{c:?}");
        }
        for c in [
            C::TopicAuthorizationFailed,
            C::MessageSizeTooLarge,
            C::UnknownTopicOrPartition,
            C::ProducerFenced,
        ] {
            assert!(!broker_fault(&KafkaError::MessageProduction(c)), "{c:?}");
        }
    }
}
