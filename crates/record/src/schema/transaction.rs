//! `__transaction_state`: transcribed from Apache Kafka's
//! `transaction-coordinator/src/main/resources/common/message/TransactionLog*.json`.

use super::*;

/// `TransactionLogKey.json`
pub static TRANSACTION_LOG_KEY: Message = Message {
    name: "TransactionLogKey",
    api_key: -1,
    valid: only(0),
    flexible: Versions::NONE,
    body: Struct::new(
        "TransactionLogKey",
        &[f("transactionalId", STRING, only(0))],
    ),
};

static TRANSACTION_LOG_VALUE_PARTITIONS_SCHEMA: Struct = Struct::new(
    "PartitionsSchema",
    &[
        f("topic", STRING, from(0)),
        f("partitionIds", Type::Array(&INT32), from(0)),
    ],
);

/// `TransactionLogValue.json`
pub static TRANSACTION_LOG_VALUE: Message = Message {
    name: "TransactionLogValue",
    api_key: -1,
    valid: range(0, 1),
    flexible: from(1),
    body: Struct::new(
        "TransactionLogValue",
        &[
            f("producerId", INT64, from(0)),
            f("previousProducerId", INT64, from(1))
                .tagged(0, from(1))
                .default_int(-1),
            f("nextProducerId", INT64, from(1))
                .tagged(1, from(1))
                .default_int(-1),
            f("producerEpoch", INT16, from(0)),
            f("transactionTimeoutMs", INT32, from(0)),
            f("transactionStatus", INT8, from(0)),
            f(
                "transactionPartitions",
                Type::Array(&Type::Struct(&TRANSACTION_LOG_VALUE_PARTITIONS_SCHEMA)),
                from(0),
            )
            .nullable(from(0)),
            f("transactionLastUpdateTimestampMs", INT64, from(0)),
            f("transactionStartTimestampMs", INT64, from(0)),
            f("clientTransactionVersion", INT16, from(1)).tagged(2, from(1)),
        ],
    ),
};
